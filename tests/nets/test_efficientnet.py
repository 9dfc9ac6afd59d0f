"""EfficientNet and EfficientNetV2: the official releases' variable names (a stand-in
checkpoint with them restores by name), parameter counts against Keras's applications,
end points, features, drop-connect, bfloat16."""
import re

import numpy as np
import pytest
import tensorflow as tf

from helpers import testing_utils
from nets import layers, nets_factory
from nets.layers.fake_quant import QuantizationParams
from training.checkpoints import restore

SIZE = 64  # every test's image size: strides 2..32 leave a 2x2 map

# The releases' block tables in their own notation (tensorflow/tpu efficientnet_builder
# _DEFAULT_BLOCKS_ARGS; google/automl effnetv2_configs v2_base_block), c1 = fused.
B0_BLOCKS = ['r1_k3_s11_e1_i32_o16_se0.25', 'r2_k3_s22_e6_i16_o24_se0.25',
             'r2_k5_s22_e6_i24_o40_se0.25', 'r3_k3_s22_e6_i40_o80_se0.25',
             'r3_k5_s11_e6_i80_o112_se0.25', 'r4_k5_s22_e6_i112_o192_se0.25',
             'r1_k3_s11_e6_i192_o320_se0.25']
V2_B0_BLOCKS = ['r1_k3_s1_e1_i32_o16_c1', 'r2_k3_s2_e4_i16_o32_c1',
                'r2_k3_s2_e4_i32_o48_c1', 'r3_k3_s2_e4_i48_o96_se0.25',
                'r5_k3_s1_e6_i96_o112_se0.25', 'r8_k3_s2_e6_i112_o192_se0.25']


def _decode(block_string):
    options = dict(re.match(r'([a-z]+)(.+)', op).groups() for op in block_string.split('_'))
    return dict(repeats=int(options['r']), kernel=int(options['k']),
                stride=int(options['s'][0]), expansion=int(options['e']),
                input=int(options['i']), output=int(options['o']),
                se=float(options.get('se', 0)), fused=options.get('c') == '1')


def official_variables(scope, block_strings, num_classes=1000):
    """{name: shape} as the release's checkpoint holds them (unscaled width and depth):
    tf.layers' numbering by creation in each block's scope, 'se/' for squeeze-excite."""
    variables = {}

    def batch_norm(prefix, depth):
        for name in ('gamma', 'beta', 'moving_mean', 'moving_variance'):
            variables[f'{prefix}/{name}'] = [depth]

    def conv_bn(prefix, conv, norm, shape):
        variables[f'{prefix}/{conv}/kernel'] = shape
        batch_norm(f'{prefix}/{norm}', shape[-1])

    first = _decode(block_strings[0])['input']
    conv_bn(f'{scope}/stem', 'conv2d', 'tpu_batch_normalization', [3, 3, 3, first])
    index = 0
    for block in map(_decode, block_strings):
        for repeat in range(block['repeats']):
            prefix = f'{scope}/blocks_{index}'
            depth_in = block['input'] if repeat == 0 else block['output']
            expanded = depth_in * block['expansion']
            convs = iter(['conv2d', 'conv2d_1'])
            norms = iter(['tpu_batch_normalization', 'tpu_batch_normalization_1',
                          'tpu_batch_normalization_2'])
            k = block['kernel']
            if block['expansion'] != 1:
                kernel = [k, k] if block['fused'] else [1, 1]
                conv_bn(prefix, next(convs), next(norms), [*kernel, depth_in, expanded])
            if not block['fused']:
                variables[f'{prefix}/depthwise_conv2d/depthwise_kernel'] = [k, k, expanded, 1]
                batch_norm(f'{prefix}/{next(norms)}', expanded)
            if block['se']:
                reduced = max(1, int(depth_in * block['se']))
                variables.update({f'{prefix}/se/conv2d/kernel': [1, 1, expanded, reduced],
                                  f'{prefix}/se/conv2d/bias': [reduced],
                                  f'{prefix}/se/conv2d_1/kernel': [1, 1, reduced, expanded],
                                  f'{prefix}/se/conv2d_1/bias': [expanded]})
            kernel = [k, k] if block['fused'] and block['expansion'] == 1 else [1, 1]
            conv_bn(prefix, next(convs), next(norms), [*kernel, expanded, block['output']])
            index += 1
    conv_bn(f'{scope}/head', 'conv2d', 'tpu_batch_normalization',
            [1, 1, _decode(block_strings[-1])['output'], 1280])
    variables[f'{scope}/head/dense/kernel'] = [1280, num_classes]
    variables[f'{scope}/head/dense/bias'] = [num_classes]
    return variables


@pytest.fixture(scope='module')
def built():
    """b0 and v2_b0 with 1,000 classes, built on SIZE x SIZE: {name: (net, end points)}."""
    nets = {}
    for name in ('efficientnet_b0', 'efficientnet_v2_b0'):
        net = nets_factory.get_network_fn(name, 1000)
        _, end_points = net(tf.random.stateless_uniform([2, SIZE, SIZE, 3], [1, 2], -1, 1))
        nets[name] = net, end_points
    return nets


def _ours(net):
    return {v.name[:-2]: v.shape.as_list() for v in net.variables}


@pytest.mark.parametrize('name, scope, blocks', [
    ('efficientnet_b0', 'efficientnet-b0', B0_BLOCKS),
    ('efficientnet_v2_b0', 'efficientnetv2-b0', V2_B0_BLOCKS)])
def test_variables_are_named_as_the_official_checkpoints(built, name, scope, blocks):
    net, _ = built[name]
    assert _ours(net) == official_variables(scope, blocks)
    trainable = {v.name[:-2] for v in net.trainable_variables}
    assert all(n.endswith(('moving_mean', 'moving_variance')) != (n in trainable)
               for n in _ours(net))


@pytest.mark.parametrize('name, scope, blocks', [
    ('efficientnet_b0', 'efficientnet-b0', B0_BLOCKS),
    ('efficientnet_v2_b0', 'efficientnetv2-b0', V2_B0_BLOCKS)])
def test_a_stand_in_official_checkpoint_restores_every_variable_by_name(
        built, tmp_path, name, scope, blocks):
    values = {n: testing_utils.golden_weight_value(n, s).astype(np.float32)
              for n, s in official_variables(scope, blocks).items()}
    prefix = testing_utils.write_tf1_checkpoint(tmp_path / 'model.ckpt', values)
    net, _ = built[name]
    plan = restore.plan_restore(net, prefix)
    assert (plan.missing, plan.mismatched, plan.checkpoint_only) == ([], [], [])
    assert len(plan.restored) == len(values)
    restore.restore_network(net, prefix)
    kernel = f'{scope}/head/dense/kernel'
    restored = {v.name[:-2]: v for v in net.variables}[kernel]
    np.testing.assert_array_equal(restored.numpy(), values[kernel])


def _keras_count(application, **options):
    import keras
    model = getattr(keras.applications, application)(
        weights=None, include_top=True, classifier_activation=None,
        input_shape=(SIZE, SIZE, 3), **options)
    # The B-variants' input Normalization layer holds its mean, variance (3 each) and
    # count (1) as weights: preprocessing, not part of our net.
    normalization = sum(layer.count_params() for layer in model.layers
                        if isinstance(layer, keras.layers.Normalization))
    return model.count_params() - normalization, normalization


def test_b0_parameters_equal_the_paper_and_keras(built):
    net, _ = built['efficientnet_b0']
    assert sum(v.shape.num_elements() for v in net.trainable_variables) == 5_288_548
    keras_count, normalization = _keras_count('EfficientNetB0')
    assert normalization == 7
    # Keras counts batch norm's moving statistics too, as our variables are.
    assert sum(v.shape.num_elements() for v in net.variables) == keras_count


@pytest.mark.parametrize('name, application', [
    *[pytest.param(*pair, marks=pytest.mark.slow) for pair in [
        ('efficientnet_v2_s', 'EfficientNetV2S'),
        ('efficientnet_v2_b0', 'EfficientNetV2B0'), ('efficientnet_b3', 'EfficientNetB3'),
        ('efficientnet_v2_b3', 'EfficientNetV2B3')]]])
def test_parameters_equal_keras(name, application):
    net = nets_factory.get_network_fn(name, 1000)
    net.build((SIZE, SIZE, 3))
    keras_count, _ = _keras_count(application)
    assert sum(v.shape.num_elements() for v in net.variables) == keras_count


@pytest.mark.parametrize('name, strides', [
    ('efficientnet_b0', {'stem': 2, 'reduction_1': 2, 'reduction_2': 4, 'reduction_3': 8,
                         'reduction_4': 16, 'reduction_5': 32}),
    ('efficientnet_v2_b0', {'stem': 2, 'reduction_1': 2, 'reduction_2': 4,
                            'reduction_3': 8, 'reduction_4': 16, 'reduction_5': 32})])
def test_end_points(built, name, strides):
    net, end_points = built[name]
    for key, stride in strides.items():
        assert end_points[key].shape[1:3] == [SIZE // stride] * 2, key
    blocks = len(net.blocks)
    assert {f'block_{i}' for i in range(blocks)} <= set(end_points)
    assert {f'block_{i}/expansion_output' for i in range(blocks)} <= set(end_points)
    assert end_points['features'] is end_points[f'block_{blocks - 1}']
    assert end_points['reduction_5'] is end_points['features']
    assert end_points['head_1x1'].shape.as_list() == [2, 2, 2, 1280]
    assert end_points['global_pool'].shape.as_list() == [2, 1, 1, 1280]
    assert end_points['Logits'].shape.as_list() == [2, 1000]
    np.testing.assert_allclose(end_points['Predictions'].numpy().sum(-1), 1, rtol=1e-5)


def test_num_classes_zero_returns_pooled_features():
    net = nets_factory.get_network_fn('efficientnet_v2_b0', 0)
    features, end_points = net(tf.zeros([1, SIZE, SIZE, 3]))
    assert features.shape.as_list() == [1, 1, 1, 1280]
    assert 'Logits' not in end_points
    assert not any('/dense/' in v.name for v in net.variables)


def test_base_gives_features_up_to_an_end_point(built):
    net, _ = built['efficientnet_b0']
    images = tf.random.stateless_uniform([2, SIZE, SIZE, 3], [1, 2], -1, 1)
    _, end_points = net(images)
    features, base_points = net.base(images)
    assert net.default_final_endpoint == 'head_1x1'
    np.testing.assert_allclose(features.numpy(), end_points['head_1x1'].numpy(), atol=1e-5)
    assert 'global_pool' not in base_points
    features, base_points = net.base(images, final_endpoint='reduction_3')
    assert features.shape.as_list() == [2, SIZE // 8, SIZE // 8, 40]
    assert 'reduction_4' not in base_points
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        net.base(images, final_endpoint='Mixed_5b')


def test_drop_connect_follows_the_release_schedule():
    net = nets_factory.get_network_fn('efficientnet_b0', 10, drop_path_rate=0.4)
    assert [b.drop_path_rate for b in net.blocks] == pytest.approx(
        [0.4 * i / 16 for i in range(16)])
    default = nets_factory.get_network_fn('efficientnet_v2_b0', 10)
    assert default.blocks[-1].drop_path_rate == pytest.approx(0.2 * 20 / 21)
    off = nets_factory.get_network_fn('efficientnet_v2_b0', 10, drop_path_rate=0.0)
    assert {b.drop_path_rate for b in off.blocks} == {0.0}


def test_drop_connect_and_dropout_draw_from_the_generator():
    net = nets_factory.get_network_fn('efficientnet_b0', 10, is_training=True,
                                      dropout_keep_prob=1.0, drop_path_rate=0.5)
    images = tf.random.stateless_uniform([4, SIZE, SIZE, 3], [1, 2], -1, 1)

    def logits(seed):
        return net(images, random_generator=tf.random.Generator.from_seed(seed))[0].numpy()

    first = logits(5)
    np.testing.assert_array_equal(logits(5), first)
    assert not np.allclose(logits(6), first)
    evaluated = [net(images, training=False)[0].numpy() for _ in range(2)]
    np.testing.assert_array_equal(*evaluated)


def test_weight_decay_reaches_kernels_and_v1_biases():
    for name, decayed in (('efficientnet_b0', ('kernel', 'bias')),
                          ('efficientnet_v2_b0', ('kernel',))):
        net = nets_factory.get_network_fn(name, 10, weight_decay=1e-5)
        net.build((SIZE, SIZE, 3))
        expected = [v for v in net.trainable_variables if v.name[:-2].endswith(decayed)]
        assert len(net.regularization_losses()) == len(expected), name


def test_batch_norm_is_the_releases():
    v1 = nets_factory.get_spec('efficientnet_b0').batch_norm
    v2 = nets_factory.get_spec('efficientnet_v2_s').batch_norm
    assert (v1.decay, v1.epsilon, v1.scale) == (0.99, 1e-3, True)
    assert (v2.decay, v2.epsilon, v2.scale) == (0.9, 1e-3, True)


def test_bfloat16_forward_computes_in_bfloat16_and_agrees():
    net = nets_factory.get_network_fn('efficientnet_v2_b0', 10)
    images = tf.random.stateless_uniform([2, SIZE, SIZE, 3], [1, 2], -1, 1)
    reference, _ = net(images)
    low, end_points = net(tf.cast(images, tf.bfloat16))
    assert low.dtype == end_points['block_5'].dtype == tf.bfloat16
    error = np.abs(tf.cast(low, tf.float32).numpy() - reference.numpy()).max()
    assert error / np.abs(reference.numpy()).max() < 0.08


def test_quantization_aware_net_tracks_every_weighted_layers_range():
    net = nets_factory.get_network_fn('efficientnet_v2_b0', 10, is_training=True,
                                      quantization=QuantizationParams(delay=0))
    logits, _ = net(tf.random.stateless_uniform([2, SIZE, SIZE, 3], [1, 2], -1, 1))
    assert logits.shape.as_list() == [2, 10]
    kernels = [v for v in net.variables if v.name.endswith('kernel:0')]
    ranges = [v for v in net.variables if v.name.endswith('act_quant/min:0')]
    assert len(ranges) == len(kernels)


def test_the_batch_norm_option_reaches_every_batch_norm():
    params = layers.BatchNormParams(decay=0.5, epsilon=0.01, center=True, scale=True)
    net = nets_factory.get_network_fn('efficientnet_b0', 10, batch_norm=params)
    norms = [m for m in net.submodules if isinstance(m, layers.BatchNorm)]
    assert len(norms) == 49 and {n.params for n in norms} == {params}
