"""MobileNetV4 (nets/mobilenet_v4/): every variant's parameters against timm's
`mobilenetv4_*`, variable names, end points, the feature extractor, Mobile MQA against a
numpy reference, drop-path's schedule, weight decay, bfloat16 and quantization."""
import numpy as np
import pytest
import tensorflow as tf

from nets import layers, nets_factory
from nets.layers.fake_quant import QuantizationParams
from nets.mobilenet_v4 import blocks, mobilenet_v4

SIZE = 64  # stride 32: a 2x2 final map
VARIANTS = [f'mobilenet_v4_{variant}' for variant in mobilenet_v4.VARIANTS]
# timm 1.0.31, timm.create_model('mobilenetv4_<variant>', num_classes=1000):
# sum of parameters().numel(), and of the batch norms' running_mean and running_var.
TIMM_COUNTS = {
    'mobilenet_v4_conv_small': (3_774_024, 25_088),
    'mobilenet_v4_conv_medium': (9_715_512, 67_904),
    'mobilenet_v4_conv_large': (32_590_864, 149_552),
    'mobilenet_v4_hybrid_medium': (11_074_648, 75_840),
    'mobilenet_v4_hybrid_large': (37_764_624, 164_400),
}


def _images(batch=2, size=SIZE, seed=(1, 2)):
    return tf.random.stateless_uniform([batch, size, size, 3], seed=seed, minval=-1)


def _counts(net):
    trainable = sum(v.shape.num_elements() for v in net.trainable_variables)
    return trainable, sum(v.shape.num_elements() for v in net.variables) - trainable


def _built(name, size=SIZE, **options):
    net = nets_factory.get_network_fn(name, 1000, **options)
    net.build((size, size, 3))
    return net


def _calibrated(name, size=SIZE):
    """`name` with weight decay, drop-path 0.5 (evaluation ignores it) and batch norms
    of decay 0: gammas, betas and layer scales drawn, then one training pass sets every
    moving statistic to its batch's, so activations stay of order one and no part of
    the net is an identity."""
    net = _built(name, size, weight_decay=1e-4, drop_path_rate=0.5, batch_norm_decay=0.0)
    generator = np.random.default_rng(3)
    for variable in net.trainable_variables:
        if '/beta' in variable.name:
            variable.assign(generator.normal(0, 0.2, variable.shape).astype(np.float32))
        elif '/gamma' in variable.name or 'layer_scale' in variable.name:
            variable.assign(generator.uniform(0.5, 1.5, variable.shape).astype(np.float32))
    net(_images(batch=8, size=size, seed=(5, 6)), training=True,
        random_generator=tf.random.Generator.from_seed(1))
    return net


@pytest.fixture(scope='module')
def small():
    return _calibrated('mobilenet_v4_conv_small')


@pytest.fixture(scope='module')
def hybrid():
    return _calibrated('mobilenet_v4_hybrid_medium', size=32)  # MQA on 2x2 and 1x1 maps


@pytest.mark.parametrize('name, net_fixture', [
    ('mobilenet_v4_conv_small', 'small'), ('mobilenet_v4_hybrid_medium', 'hybrid'),
    *(pytest.param(name, None, marks=pytest.mark.slow) for name in (
        'mobilenet_v4_conv_medium', 'mobilenet_v4_conv_large',
        'mobilenet_v4_hybrid_large'))])
def test_parameter_counts_equal_timms(name, net_fixture, request):
    # A conv net's variables do not depend on the image size: built small to count.
    net = request.getfixturevalue(net_fixture) if net_fixture else _built(name, size=32)
    assert _counts(net) == TIMM_COUNTS[name]
    _, end_points = net.base(_images(batch=1, size=32), training=False)
    assert [end_points[f'stage_{i}'].shape[1] for i in range(5)] == [8, 4, 2, 1, 1]


def test_conv_small_variables_are_named_by_stage_block_and_layer(small):
    shapes = {v.name[:-2]: v.shape.as_list() for v in small.variables}
    scope = 'mobilenet_v4_conv_small'

    def under(prefix):
        return {name[len(scope) + len(prefix) + 2:]: shape for name, shape in shapes.items()
                if name.startswith(f'{scope}/{prefix}/')}

    norm = lambda depth: {f'BatchNorm/{s}': [depth] for s in (  # noqa: E731
        'beta', 'gamma', 'moving_mean', 'moving_variance')}
    conv = lambda name, shape: {f'{name}/weights': shape, **{  # noqa: E731
        f'{name}/{k}': v for k, v in norm(shape[-1]).items()}}
    depthwise = lambda name, k, depth: {  # noqa: E731
        f'{name}/depthwise_weights': [k, k, depth, 1],
        **{f'{name}/{key}': v for key, v in norm(depth).items()}}
    assert under('stem') == conv('conv', [3, 3, 3, 32])
    assert under('stage_0/block_0') == conv('conv', [3, 3, 32, 32])
    # ExtraDW: start 5x5, expand 3x, middle 5x5 (stride 2), project.
    assert under('stage_2/block_0') == {
        **depthwise('start_depthwise', 5, 64), **conv('expand', [1, 1, 64, 192]),
        **depthwise('middle_depthwise', 5, 192), **conv('project', [1, 1, 192, 96])}
    # The inverted bottleneck (middle only) and the ConvNeXt-like block (start only).
    assert under('stage_2/block_1') == {
        **conv('expand', [1, 1, 96, 192]), **depthwise('middle_depthwise', 3, 192),
        **conv('project', [1, 1, 192, 96])}
    assert under('stage_2/block_5') == {
        **depthwise('start_depthwise', 3, 96), **conv('expand', [1, 1, 96, 384]),
        **conv('project', [1, 1, 384, 96])}
    assert under('head') == {**conv('conv', [1, 1, 960, 1280]),
                             'logits/weights': [1280, 1000], 'logits/biases': [1000]}
    assert not [name for name in shapes if 'layer_scale' in name]
    assert [len(stage) for stage in small.stages] == [2, 2, 6, 6, 1]


def test_hybrid_mqa_variables_and_layer_scales(hybrid):
    shapes = {v.name[:-2]: v.shape.as_list() for v in hybrid.variables}
    block = 'mobilenet_v4_hybrid_medium/stage_2/block_4'
    norm = {f'{block}/{part}/{s}': [160] for part in (
        'input_norm', 'key_downsample/BatchNorm', 'value_downsample/BatchNorm')
        for s in ('beta', 'gamma', 'moving_mean', 'moving_variance')}
    assert {name: shape for name, shape in shapes.items()
            if name.startswith(block + '/')} == {
        **norm, f'{block}/query/weights': [1, 1, 160, 256],
        f'{block}/key_downsample/depthwise_weights': [3, 3, 160, 1],
        f'{block}/key/weights': [1, 1, 160, 64],
        f'{block}/value_downsample/depthwise_weights': [3, 3, 160, 1],
        f'{block}/value/weights': [1, 1, 160, 64],
        f'{block}/output/weights': [1, 1, 256, 160], f'{block}/layer_scale': [160]}
    attention = [b for b in hybrid.blocks if isinstance(b, blocks.MobileMQA)]
    assert len(attention) == 8
    scaled = [b for b in hybrid.blocks if b.layer_scale is not None]
    assert len(scaled) == 2 + 12 + 16  # every UIB and MQA block


def test_layer_scales_start_at_timms_value():
    block = blocks.UniversalInvertedBottleneck(
        'block', blocks.UIBSpec(3, 3, 1, 2, 8), input_depth=8, activation=tf.nn.relu,
        options={}, layer_scale_init=mobilenet_v4.LAYER_SCALE_INIT)
    block(tf.ones([1, 4, 4, 8]), training=False)
    np.testing.assert_allclose(block.layer_scale.numpy(), np.full([8], 1e-5))


def _numpy_mqa(block, inputs):
    """Multi-query attention without key/value downsampling, as timm's
    MultiQueryAttention2d computes it, on [batch, h, w, c] numpy inputs."""
    norm = block.input_norm
    x = ((inputs - norm.moving_mean.numpy())
         / np.sqrt(norm.moving_variance.numpy() + 1.001e-5) * norm.gamma.numpy()
         + norm.beta.numpy())
    batch, height, width, _ = x.shape
    tokens = x.reshape(batch, height * width, -1)
    weights = lambda layer: layer.weights.numpy()[0, 0]  # noqa: E731
    queries = (tokens @ weights(block.query)).reshape(batch, height * width, block.heads, -1)
    keys, values = tokens @ weights(block.key), tokens @ weights(block.value)
    scores = np.einsum('bnhk,bmk->bhnm', queries, keys) / np.sqrt(block.key_depth)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    attention = scores / scores.sum(-1, keepdims=True)
    attended = np.einsum('bhnm,bmk->bnhk', attention, values).reshape(batch, height * width, -1)
    branch = (attended @ weights(block.output)) * block.layer_scale.numpy()
    return inputs + branch.reshape(inputs.shape)


def test_mobile_mqa_matches_a_numpy_reference(hybrid):
    block = next(b for b in hybrid.blocks
                 if isinstance(b, blocks.MobileMQA) and b.key_downsample is None)
    inputs = np.random.default_rng(4).normal(size=(2, 3, 2, 256)).astype(np.float32)
    np.testing.assert_allclose(block(tf.constant(inputs), training=False),
                               _numpy_mqa(block, inputs), rtol=1e-4, atol=1e-4)


def test_end_points(small):
    logits, end_points = small(_images(), training=False)
    assert {name: tensor.shape.as_list() for name, tensor in end_points.items()} == {
        'stem': [2, 32, 32, 32], 'stage_0': [2, 16, 16, 32], 'stage_1': [2, 8, 8, 64],
        'stage_2': [2, 4, 4, 96], 'stage_3': [2, 2, 2, 128], 'stage_4': [2, 2, 2, 960],
        'global_pool': [2, 960], 'pre_logits': [2, 1280], 'Logits': [2, 1000],
        'Predictions': [2, 1000]}
    assert logits is end_points['Logits']
    np.testing.assert_allclose(end_points['global_pool'],
                               end_points['stage_4'].numpy().mean((1, 2)), rtol=1e-5,
                               atol=1e-6)


def test_num_classes_zero_returns_the_head_features(small):
    features_net = nets_factory.get_network_fn('mobilenet_v4_conv_small', 0)
    features_net.build((32, 32, 3))  # the same variables at any size
    assert not [v for v in features_net.variables if '/logits/' in v.name]
    by_name = {v.name: v for v in small.variables}
    for variable in features_net.variables:
        variable.assign(by_name[variable.name])
    images = _images()
    features, end_points = features_net(images, training=False)
    assert features.shape == [2, 1280] and 'Logits' not in end_points
    np.testing.assert_allclose(features, small(images, training=False)[1]['pre_logits'],
                               rtol=1e-5, atol=1e-5)


def test_base_stops_at_the_end_point_asked_for(small):
    images = _images()
    features, end_points = small.base(images, training=False)
    assert list(end_points) == ['stem', 'stage_0', 'stage_1', 'stage_2', 'stage_3',
                                'stage_4']
    features, end_points = small.base(images, final_endpoint='stage_2', training=False)
    assert features.shape == [2, 4, 4, 96] and list(end_points)[-1] == 'stage_2'
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        small.base(images, final_endpoint='Conv2d_1', training=False)


def test_drop_path_schedule_is_timms_over_every_block():
    net = nets_factory.get_network_fn('mobilenet_v4_conv_small', 10, drop_path_rate=0.2)
    rates = [block.drop_path_rate for block in net.blocks]
    np.testing.assert_allclose(rates, [0.2 * i / 17 for i in range(17)], atol=1e-12)
    assert len(net.residual_blocks) == 5 + 5  # stage 2's and 3's stride-1 blocks


def test_drop_path_drops_in_training_only(small):
    statistics = [(v, v.numpy()) for v in small.variables if not v.trainable]
    images = _images(batch=4, size=32)
    evaluated = small(images, training=False)[0].numpy()
    rates = [block.drop_path_rate for block in small.blocks]
    try:
        def trained(seed):
            return small(images, training=True,
                         random_generator=tf.random.Generator.from_seed(seed))[0].numpy()

        first = trained(5)
        np.testing.assert_array_equal(trained(5), first)  # the generator decides
        assert not np.allclose(trained(6), first)
        for block in small.blocks:
            block.drop_path_rate = 0.0
        plain = trained(5)
        np.testing.assert_array_equal(trained(6), plain)  # nothing random left
        assert not np.allclose(first, plain)
    finally:
        for block, rate in zip(small.blocks, rates):
            block.drop_path_rate = rate
        for variable, value in statistics:
            variable.assign(value)
    np.testing.assert_array_equal(small(images, training=False)[0], evaluated)


def test_weight_decay_covers_conv_and_dense_weights_only(small):
    weights = [v for v in small.variables if v.name.endswith('weights:0')]
    losses = small.regularization_losses()
    assert len(losses) == len(weights) == 1 + 2 + 2 + (4 + 4 * 3 + 3) + (4 + 4 + 4 * 3) + 3
    expected = sum(1e-4 * np.sum(v.numpy().astype(np.float64) ** 2) / 2 for v in weights)
    assert float(tf.add_n(losses)) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize('net_fixture', ['small', 'hybrid'])
def test_bfloat16_forward_agrees_with_float32_block_by_block(net_fixture, request):
    """A random net amplifies any perturbation from block to block (bfloat16 moved the
    logits by 1.1 % and the hybrid's by 4.4 % here at 32x32; 8 % and 38 % at 64x64), so
    each block is compared on the same input: the float32 net's, rounded to bfloat16."""
    net = request.getfixturevalue(net_fixture)
    images = _images(size=32)
    low, end_points = net(tf.cast(images, tf.bfloat16), training=False)
    assert low.dtype == end_points['stage_4'].dtype == tf.bfloat16
    assert np.isfinite(tf.cast(low, tf.float32).numpy()).all()
    errors, net_input = [], net.stem(images, training=False)
    for block in net.blocks:
        output = block(net_input, training=False).numpy()
        rounded = block(tf.cast(net_input, tf.bfloat16), training=False)
        assert rounded.dtype == tf.bfloat16
        errors.append(np.abs(tf.cast(rounded, tf.float32).numpy() - output).max()
                      / np.abs(output).max())
        net_input = tf.constant(output)
    assert max(errors) < 0.03  # bfloat16 keeps 8 bits (0.4 %); measured: up to 1.2 %


def test_quantization_aware_net_fake_quantizes_its_weighted_layers():
    net = nets_factory.get_network_fn('mobilenet_v4_conv_small', 10,
                                      quantization=QuantizationParams(delay=0))
    logits, _ = net(_images(batch=1, size=32), training=True,
                    step=tf.constant(1, tf.int64))
    assert logits.shape == [1, 10]
    weighted = list(net._flatten(predicate=lambda m: isinstance(m, layers.WeightedLayer)))
    # stem, stage 0 and 1's convs, stage 2's and 3's UIB layers, stage 4, head, logits
    assert len(weighted) == 1 + 2 + 2 + (4 + 4 * 3 + 3) + (4 + 4 + 4 * 3) + 1 + 1 + 1
    assert all(layer.act_quant is not None for layer in weighted)


def test_specs():
    for name in VARIANTS:
        spec = nets_factory.get_spec(name)
        assert (spec.drop_path_option, spec.batch_norm) == (
            'drop_path_rate', mobilenet_v4.BATCH_NORM)
    assert {name: (nets_factory.get_spec(name).default_image_size,
                   nets_factory.get_spec(name).preprocessing_name) for name in VARIANTS} == {
        'mobilenet_v4_conv_small': (224, 'mobilenet_v4_conv_small'),
        'mobilenet_v4_conv_medium': (256, 'mobilenet_v4'),
        'mobilenet_v4_conv_large': (384, 'mobilenet_v4'),
        'mobilenet_v4_hybrid_medium': (256, 'mobilenet_v4'),
        'mobilenet_v4_hybrid_large': (384, 'mobilenet_v4')}
    assert (mobilenet_v4.BATCH_NORM.decay, mobilenet_v4.BATCH_NORM.epsilon) == (0.9, 1e-5)
