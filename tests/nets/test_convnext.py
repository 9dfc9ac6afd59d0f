"""ConvNeXt (nets/convnext.py): sizes against Keras's applications, variable names, end
points, the feature extractor, stochastic depth, bfloat16 and quantization."""
import numpy as np
import pytest
import tensorflow as tf

from nets import convnext, layers, nets_factory
from nets.layers.fake_quant import QuantizationParams

SIZE = 64  # stride 32: a 2x2 final map, small enough for the fast suite
VARIANTS = ['convnext_tiny', 'convnext_small', 'convnext_base', 'convnext_large',
            'convnext_xlarge']
KERAS_APPLICATIONS = {'convnext_tiny': 'ConvNeXtTiny', 'convnext_small': 'ConvNeXtSmall',
                      'convnext_base': 'ConvNeXtBase', 'convnext_large': 'ConvNeXtLarge',
                      'convnext_xlarge': 'ConvNeXtXLarge'}


def _images(batch=2, size=SIZE, seed=(1, 2)):
    return tf.random.stateless_uniform([batch, size, size, 3], seed=seed, minval=-1)


def _traced(net, size=SIZE):
    """Builds `net`'s variables by tracing it (no full-size computation)."""
    tf.function(lambda x: net(x)).get_concrete_function(
        tf.TensorSpec([1, size, size, 3], tf.float32))
    return net


def _parameter_count(net):
    return sum(v.shape.num_elements() for v in net.variables)


def _keras_parameter_count(name):
    import keras
    application = getattr(keras.applications, KERAS_APPLICATIONS[name])
    model = application(weights=None, include_top=True, include_preprocessing=False,
                        classifier_activation=None, input_shape=(32, 32, 3))
    count = model.count_params()
    keras.backend.clear_session()
    return count


@pytest.fixture(scope='module')
def tiny():
    """convnext_tiny with 1,000 classes, built once at SIZE."""
    net = nets_factory.get_network_fn('convnext_tiny', 1000)
    net.build((SIZE, SIZE, 3))
    return net


def test_tiny_has_keras_convnext_tiny_parameter_count(tiny):
    assert _parameter_count(tiny) == 28_589_128
    assert _parameter_count(tiny) == _keras_parameter_count('convnext_tiny')


@pytest.mark.slow
@pytest.mark.parametrize('name', VARIANTS[1:])
def test_every_variant_has_its_keras_parameter_count(name):
    net = _traced(nets_factory.get_network_fn(name, 1000))
    assert _parameter_count(net) == _keras_parameter_count(name)


def test_variables_are_named_by_stage_and_block(tiny):
    shapes = {v.name[:-2]: v.shape.as_list() for v in tiny.variables}
    block = 'convnext_tiny/stage_2/block_8'
    assert {name: shape for name, shape in shapes.items() if name.startswith(block + '/')} == {
        f'{block}/depthwise_conv/depthwise_weights': [7, 7, 384, 1],
        f'{block}/depthwise_conv/biases': [384],
        f'{block}/layer_norm/gamma': [384], f'{block}/layer_norm/beta': [384],
        f'{block}/pointwise_conv_1/weights': [384, 1536],
        f'{block}/pointwise_conv_1/biases': [1536],
        f'{block}/pointwise_conv_2/weights': [1536, 384],
        f'{block}/pointwise_conv_2/biases': [384],
        f'{block}/layer_scale': [384]}
    assert {name: shapes[name] for name in shapes if '/block_' not in name} == {
        'convnext_tiny/stem/conv/weights': [4, 4, 3, 96],
        'convnext_tiny/stem/conv/biases': [96],
        'convnext_tiny/stem/layer_norm/gamma': [96],
        'convnext_tiny/stem/layer_norm/beta': [96],
        **{f'convnext_tiny/stage_{i}/downsample/{name}': shape
           for i, depth in ((1, 192), (2, 384), (3, 768))
           for name, shape in (('layer_norm/gamma', [depth // 2]),
                               ('layer_norm/beta', [depth // 2]),
                               ('conv/weights', [2, 2, depth // 2, depth]),
                               ('conv/biases', [depth]))},
        'convnext_tiny/head/layer_norm/gamma': [768],
        'convnext_tiny/head/layer_norm/beta': [768],
        'convnext_tiny/head/logits/weights': [768, 1000],
        'convnext_tiny/head/logits/biases': [1000]}
    blocks = {name.split('/')[1] + '/' + name.split('/')[2] for name in shapes
              if '/block_' in name}
    assert len(blocks) == 3 + 3 + 9 + 3
    assert all(v.trainable for v in tiny.variables)  # no batch norm, no statistics
    assert nets_factory.get_spec('convnext_tiny').batch_norm is None


def test_layer_scale_starts_at_one_millionth(tiny):
    scales = [v for v in tiny.variables if v.name.endswith('layer_scale:0')]
    assert len(scales) == 18
    for scale in scales:
        np.testing.assert_allclose(scale.numpy(), 1e-6)


def test_end_points(tiny):
    logits, end_points = tiny(_images(), training=False)
    assert {name: tensor.shape.as_list() for name, tensor in end_points.items()} == {
        'stem': [2, 16, 16, 96], 'stage_0': [2, 16, 16, 96], 'stage_1': [2, 8, 8, 192],
        'stage_2': [2, 4, 4, 384], 'stage_3': [2, 2, 2, 768], 'global_pool': [2, 768],
        'head_norm': [2, 768], 'Logits': [2, 1000], 'Predictions': [2, 1000]}
    assert logits is end_points['Logits']
    np.testing.assert_allclose(end_points['global_pool'],
                               end_points['stage_3'].numpy().mean((1, 2)), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(end_points['Predictions'].numpy().sum(-1), 1.0, rtol=1e-5)


def test_num_classes_zero_returns_the_normalised_pooled_features(tiny):
    features_net = nets_factory.get_network_fn('convnext_tiny', 0)
    features_net.build((SIZE, SIZE, 3))
    assert not [v for v in features_net.variables if '/logits/' in v.name]
    by_name = {v.name: v for v in tiny.variables}
    for variable in features_net.variables:
        variable.assign(by_name[variable.name])
    images = _images()
    features, end_points = features_net(images, training=False)
    assert features.shape == [2, 768] and 'Logits' not in end_points
    np.testing.assert_allclose(features, tiny(images, training=False)[1]['head_norm'],
                               rtol=1e-5, atol=1e-5)


def test_base_stops_at_the_end_point_asked_for(tiny):
    images = _images()
    features, end_points = tiny.base(images, training=False)
    assert list(end_points) == ['stem', 'stage_0', 'stage_1', 'stage_2', 'stage_3']
    np.testing.assert_allclose(features, tiny(images, training=False)[1]['stage_3'],
                               rtol=1e-5, atol=1e-5)
    features, end_points = tiny.base(images, final_endpoint='stage_1', training=False)
    assert features.shape == [2, 8, 8, 192] and list(end_points)[-1] == 'stage_1'
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        tiny.base(images, final_endpoint='block4', training=False)


@pytest.mark.slow
def test_weight_decay_covers_conv_and_dense_weights_only():
    net = _traced(nets_factory.get_network_fn('convnext_tiny', 10, weight_decay=0.05))
    weights = [v for v in net.variables if v.name.endswith('weights:0')]
    assert len(weights) == 1 + 3 + 18 * 3 + 1
    losses = net.regularization_losses()
    assert len(losses) == len(weights)
    expected = sum(0.05 * np.sum(v.numpy().astype(np.float64) ** 2) / 2 for v in weights)
    assert float(tf.add_n(losses)) == pytest.approx(expected, rel=1e-5)


@pytest.fixture(scope='module')
def dropping_and_plain():
    """convnext_tiny with drop_path_rate 0.5 and without, the same weights."""
    dropping = nets_factory.get_network_fn('convnext_tiny', 10, is_training=True,
                                           drop_path_rate=0.5)
    plain = nets_factory.get_network_fn('convnext_tiny', 10, is_training=True)
    dropping.build((SIZE, SIZE, 3))
    plain.build((SIZE, SIZE, 3))
    for source, target in zip(dropping.variables, plain.variables):
        target.assign(source)
    # Layer scales of 1: the branches then move the logits enough to see.
    for net in (dropping, plain):
        for variable in net.variables:
            if variable.name.endswith('layer_scale:0'):
                variable.assign(tf.ones_like(variable))
    return dropping, plain


def test_drop_path_rate_is_linear_over_all_blocks(dropping_and_plain):
    dropping, plain = dropping_and_plain
    rates = [block.drop_path_rate for block in dropping.residual_blocks]
    np.testing.assert_allclose(rates, np.linspace(0.0, 0.5, 18), rtol=0, atol=1e-12)
    assert all(block.drop_path_rate == 0.0 for block in plain.residual_blocks)


def test_drop_path_drops_in_training_only(dropping_and_plain):
    dropping, plain = dropping_and_plain
    images = _images(batch=4)
    evaluated = dropping(images, training=False)[0].numpy()
    np.testing.assert_allclose(plain(images, training=False)[0], evaluated, rtol=1e-6)

    def trained(net, seed):
        return net(images, training=True,
                   random_generator=tf.random.Generator.from_seed(seed))[0].numpy()

    first = trained(dropping, 5)
    np.testing.assert_array_equal(trained(dropping, 5), first)  # the generator decides
    assert not np.allclose(trained(dropping, 6), first)
    np.testing.assert_allclose(trained(plain, 5), evaluated, rtol=1e-5, atol=1e-5)
    assert not np.allclose(first, evaluated)


def test_bfloat16_forward_agrees_with_float32(dropping_and_plain):
    _, net = dropping_and_plain  # layer scales of 1: every branch counts
    images = _images()
    reference, _ = net(images, training=False)
    low, end_points = net(tf.cast(images, tf.bfloat16), training=False)
    assert low.dtype == end_points['Predictions'].dtype == tf.bfloat16
    assert end_points['stage_3'].dtype == tf.bfloat16
    low, reference = tf.cast(low, tf.float32).numpy(), reference.numpy()
    # bfloat16 rounds each value to 8 bits (0.4 %); measured here: 1.1 %.
    assert np.abs(low - reference).max() / np.abs(reference).max() < 0.05


def test_quantization_aware_net_fake_quantizes_its_weighted_layers():
    net = nets_factory.get_network_fn('convnext_tiny', 10,
                                      quantization=QuantizationParams(delay=0))
    logits, _ = net(_images(batch=1), training=True, step=tf.constant(1, tf.int64))
    assert logits.shape == [1, 10]
    weighted = list(net._flatten(predicate=lambda m: isinstance(m, layers.WeightedLayer)))
    assert len(weighted) == 1 + 3 + 18 * 3 + 1
    assert all(layer.act_quant is not None for layer in weighted)


def test_variants_follow_the_paper():
    assert convnext.VARIANTS == {
        'tiny': ((3, 3, 9, 3), (96, 192, 384, 768)),
        'small': ((3, 3, 27, 3), (96, 192, 384, 768)),
        'base': ((3, 3, 27, 3), (128, 256, 512, 1024)),
        'large': ((3, 3, 27, 3), (192, 384, 768, 1536)),
        'xlarge': ((3, 3, 27, 3), (256, 512, 1024, 2048))}
    for name in VARIANTS:
        spec = nets_factory.get_spec(name)
        assert (spec.default_image_size, spec.preprocessing_name,
                spec.drop_path_option) == (224, 'convnext', 'drop_path_rate')
