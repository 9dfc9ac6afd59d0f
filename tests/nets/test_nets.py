"""Every implemented net against TF-Slim's reference: variables, end points, logits."""
import testing_utils
import numpy as np
import pytest
import tensorflow as tf

from deployment.errors import UsageError
from nets import layers, nets_factory

IMPLEMENTED = nets_factory.network_names()
GOLDEN_DIR = testing_utils.TEST_DATA / 'slim_reference' / 'golden'


def _build(name, num_classes, is_training):
    net = nets_factory.get_network_fn(name, num_classes, is_training=is_training)
    size = net.default_image_size
    logits, end_points = net(tf.zeros([2, size, size, 3]))
    return net, logits, end_points


@pytest.mark.parametrize('mode', ['inference', 'training'])
@pytest.mark.parametrize('name', IMPLEMENTED)
def test_variables_and_end_points_match_slim(name, mode, slim_nets):
    reference = slim_nets[name]
    net, logits, end_points = _build(name, reference['num_classes'], mode == 'training')
    ours = sorted((v.name[:-2], v.shape.as_list(), v.trainable) for v in net.variables)
    theirs = sorted((n, s, t) for n, s, t in reference[mode]['variables'])
    assert ours == theirs
    assert {k: v.shape.as_list() for k, v in end_points.items()} == \
        reference[mode]['end_points']
    assert logits.shape.as_list() == reference[mode]['logits_shape']
    assert net.default_image_size == reference['default_image_size']


@pytest.mark.parametrize('name', [n for n in IMPLEMENTED
                                  if (GOLDEN_DIR / f'{n}.npz').exists()])
def test_logits_match_golden(name, slim_nets):
    golden = np.load(GOLDEN_DIR / f'{name}.npz')
    net = nets_factory.get_network_fn(name, slim_nets[name]['num_classes'])
    net.build([net.default_image_size, net.default_image_size, 3])
    for variable in net.variables:
        variable.assign(testing_utils.golden_weight_value(variable.name[:-2], variable.shape))
    logits, end_points = net(testing_utils.golden_input(net.default_image_size))
    scale = max(1.0, np.abs(golden['logits']).max())
    assert np.abs(logits.numpy() - golden['logits']).max() / scale < 1e-4
    np.testing.assert_allclose(end_points['Predictions'].numpy(), golden['predictions'],
                               atol=1e-4)
    for key, mean, std in zip(golden['endpoint_names'], golden['endpoint_mean'],
                              golden['endpoint_std']):
        assert end_points[key].numpy().mean() == pytest.approx(mean, rel=1e-3, abs=1e-4)
        assert end_points[key].numpy().std() == pytest.approx(std, rel=1e-3, abs=1e-4)


@pytest.mark.parametrize('name', IMPLEMENTED)
def test_num_classes_zero_returns_pre_logits(name):
    net, features, end_points = _build(name, 0, False)
    assert features.shape.rank == 2
    assert 'Logits' not in end_points
    assert not any('logits' in v.name.lower() or '/fc4/' in v.name for v in net.variables
                   if v.shape.rank == 2 and v.shape[-1] == 10)


def test_weight_decay_terms_follow_slim_arg_scopes():
    # cifarnet decays only fc3 and fc4; lenet decays all four weight tensors.
    cifar = nets_factory.get_network_fn('cifarnet', 10, weight_decay=0.004)
    cifar.build([32, 32, 3])
    assert len(cifar.regularization_losses()) == 2
    lenet = nets_factory.get_network_fn('lenet', 10, weight_decay=0.01)
    lenet.build([28, 28, 3])
    losses = lenet.regularization_losses()
    assert len(losses) == 4
    expected = sum(0.01 * np.sum(v.numpy() ** 2) / 2 for v in lenet.variables
                   if v.name.endswith('weights:0'))
    assert float(tf.add_n(losses)) == pytest.approx(expected, rel=1e-5)
    no_decay = nets_factory.get_network_fn('lenet', 10, weight_decay=0.0)
    no_decay.build([28, 28, 3])
    assert no_decay.regularization_losses() == []


def test_dropout_active_only_in_training():
    net = nets_factory.get_network_fn('cifarnet', 10, is_training=True)
    images = tf.random.uniform([4, 32, 32, 3])
    first, _ = net(images)
    second, _ = net(images)
    assert not np.allclose(first, second)
    eval_first, _ = net(images, training=False)
    eval_second, _ = net(images, training=False)
    np.testing.assert_array_equal(eval_first, eval_second)


def test_unknown_model_name_lists_choices():
    with pytest.raises(UsageError, match='cifarnet.*lenet'):
        nets_factory.get_network_fn('resnet_v9', 10)


def test_unset_options_keep_net_defaults():
    net = nets_factory.get_network_fn('cifarnet', 10, dropout_keep_prob=None)
    assert net.dropout_keep_prob == 0.5
    net = nets_factory.get_network_fn('cifarnet', 10, dropout_keep_prob=0.8)
    assert net.dropout_keep_prob == 0.8


class TestLayerKit:

    def test_batch_norm_updates_moving_statistics_like_slim(self):
        bn = layers.BatchNorm('Net/BatchNorm', layers.BatchNormParams(decay=0.9, scale=True))
        x = tf.constant(np.random.default_rng(1).normal(3.0, 2.0, (8, 4, 4, 5)), tf.float32)
        y = bn(x, training=True)
        np.testing.assert_allclose(y.numpy().mean(axis=(0, 1, 2)), 0.0, atol=1e-4)
        batch_mean = x.numpy().mean(axis=(0, 1, 2))
        unbiased_var = x.numpy().var(axis=(0, 1, 2), ddof=1)
        np.testing.assert_allclose(bn.moving_mean.numpy(), 0.1 * batch_mean, rtol=1e-4)
        np.testing.assert_allclose(bn.moving_variance.numpy(), 0.9 + 0.1 * unbiased_var,
                                   rtol=1e-4)
        assert sorted(v.name for v in bn.variables) == [
            'Net/BatchNorm/beta:0', 'Net/BatchNorm/gamma:0',
            'Net/BatchNorm/moving_mean:0', 'Net/BatchNorm/moving_variance:0']
        inference = bn(x, training=False).numpy()
        expected = (x.numpy() - bn.moving_mean.numpy()) / np.sqrt(
            bn.moving_variance.numpy() + 1e-3)
        np.testing.assert_allclose(inference, expected, rtol=1e-4, atol=1e-4)

    def test_normalized_conv_has_no_biases(self):
        conv = layers.Conv2D('Net/conv', 4, 3, normalizer=layers.BatchNormParams())
        conv(tf.zeros([1, 8, 8, 2]), training=False)
        assert sorted(v.name for v in conv.variables) == [
            'Net/conv/BatchNorm/beta:0', 'Net/conv/BatchNorm/moving_mean:0',
            'Net/conv/BatchNorm/moving_variance:0', 'Net/conv/weights:0']

    def test_separable_conv_variables(self):
        sep = layers.SeparableConv2D('Net/sep', 6, 3, depth_multiplier=2)
        out = sep(tf.zeros([1, 8, 8, 3]))
        assert out.shape == [1, 8, 8, 6]
        shapes = {v.name: v.shape.as_list() for v in sep.variables}
        assert shapes == {'Net/sep/depthwise_weights:0': [3, 3, 3, 2],
                          'Net/sep/pointwise_weights:0': [1, 1, 6, 6],
                          'Net/sep/biases:0': [6]}
        depthwise = layers.SeparableConv2D('Net/dw', None, 3, stride=2)
        assert depthwise(tf.zeros([1, 8, 8, 3])).shape == [1, 4, 4, 3]

    def test_layers_keep_names_under_mirrored_strategy(self):
        strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
        with strategy.scope():
            net = nets_factory.get_network_fn('lenet', 10)
            net.build([28, 28, 1])
        names = sorted(v.name for v in net.variables)
        assert names[0] == 'LeNet/conv1/biases:0'
        assert all(isinstance(v, tf.distribute.DistributedValues) for v in net.variables)
