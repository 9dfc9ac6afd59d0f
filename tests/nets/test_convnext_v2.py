"""ConvNeXt V2 (nets/convnext_v2.py): global response norm against a numpy reference,
variable names, end points, the feature extractor, bfloat16, and every variant's
parameter count against timm's `convnextv2_<variant>`."""
import numpy as np
import pytest
import tensorflow as tf

from nets import convnext_v2, layers, nets_factory

SIZE = 64  # stride 32: a 2x2 final map, so the response norm sums over pixels
VARIANTS = [f'convnext_v2_{variant}' for variant in convnext_v2.VARIANTS]
# sum(p.numel() for p in timm.create_model('convnextv2_<variant>').parameters()), timm
# 1.0.31, 1000 classes (the count does not depend on the image size).
TIMM_PARAMETER_COUNTS = {
    'convnext_v2_atto': 3_708_400, 'convnext_v2_femto': 5_233_240,
    'convnext_v2_pico': 9_066_280, 'convnext_v2_nano': 15_623_800,
    'convnext_v2_tiny': 28_635_496, 'convnext_v2_base': 88_717_800,
    'convnext_v2_large': 197_956_840, 'convnext_v2_huge': 660_289_640}


def _images(batch=2, size=SIZE, seed=(1, 2)):
    return tf.random.stateless_uniform([batch, size, size, 3], seed=seed, minval=-1)


def _parameter_count(net):
    return sum(v.shape.num_elements() for v in net.variables)


def _counted_from_the_table(blocks_per_stage, depths, num_classes=1000):
    """The variables a ConvNeXt V2 of these stages holds, counted shape by shape."""
    stem = 4 * 4 * 3 * depths[0] + depths[0] + 2 * depths[0]
    downsamples = sum(2 * inner + 2 * 2 * inner * outer + outer
                      for inner, outer in zip(depths, depths[1:]))
    # depthwise 7x7 + biases, layer norm, 4x expansion + biases, GRN, projection + biases
    blocks = sum(count * (49 * d + d + 2 * d + 4 * d * d + 4 * d + 2 * 4 * d
                          + 4 * d * d + d)
                 for count, d in zip(blocks_per_stage, depths))
    head = 2 * depths[-1] + depths[-1] * num_classes + num_classes
    return stem + downsamples + blocks + head


def _with_random_response_norms(net, seed=3):
    """GRN's gamma and beta start at zeros (the identity); random ones make it count."""
    generator = np.random.default_rng(seed)
    for variable in net.variables:
        if '/global_response_norm/' in variable.name:
            variable.assign(generator.normal(0, 0.5, variable.shape).astype(np.float32))
    return net


@pytest.fixture(scope='module')
def atto():
    """convnext_v2_atto with 1,000 classes, built once at SIZE."""
    net = nets_factory.get_network_fn('convnext_v2_atto', 1000)
    net.build((SIZE, SIZE, 3))
    return _with_random_response_norms(net)


def test_global_response_norm_matches_the_papers_formula():
    values = np.random.default_rng(0).normal(size=(2, 3, 5, 4)).astype(np.float32)
    norm = layers.GlobalResponseNorm('grn', epsilon=1e-6)
    norm(tf.constant(values))
    gamma, beta = np.float32([0.5, -1.0, 2.0, 0.1]), np.float32([0.3, 0.0, -0.2, 1.0])
    norm.gamma.assign(gamma)
    norm.beta.assign(beta)
    spatial_norms = np.sqrt((values.astype(np.float64) ** 2).sum(axis=(1, 2), keepdims=True))
    scale = spatial_norms / (spatial_norms.mean(axis=-1, keepdims=True) + 1e-6)
    expected = values + gamma * (values * scale) + beta
    np.testing.assert_allclose(norm(tf.constant(values)), expected, rtol=1e-5, atol=1e-6)
    assert sorted(v.name for v in norm.variables) == ['grn/beta:0', 'grn/gamma:0']
    low = norm(tf.constant(values, tf.bfloat16))
    assert low.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(low, tf.float32), expected, rtol=0.02, atol=0.05)


def test_a_fresh_response_norm_is_the_identity():
    values = tf.random.stateless_normal([1, 4, 4, 8], seed=(4, 5))
    np.testing.assert_array_equal(layers.GlobalResponseNorm()(values), values)


def test_atto_has_timm_convnextv2_atto_parameter_count(atto):
    assert _parameter_count(atto) == TIMM_PARAMETER_COUNTS['convnext_v2_atto']
    assert _parameter_count(atto) == _counted_from_the_table(*convnext_v2.VARIANTS['atto'])


@pytest.mark.parametrize('name', VARIANTS)
def test_every_variant_table_gives_timm_parameter_count(name):
    """The atto test proves the count by shapes is the net's; the tables are the rest."""
    variant = name[len('convnext_v2_'):]
    assert (_counted_from_the_table(*convnext_v2.VARIANTS[variant])
            == TIMM_PARAMETER_COUNTS[name])


@pytest.mark.slow
@pytest.mark.parametrize('name', VARIANTS[1:])
def test_every_variant_built_has_timm_parameter_count(name):
    net = nets_factory.get_network_fn(name, 1000)
    tf.function(lambda x: net(x)).get_concrete_function(
        tf.TensorSpec([1, 32, 32, 3], tf.float32))
    assert _parameter_count(net) == TIMM_PARAMETER_COUNTS[name]


def test_variables_are_convnexts_with_response_norms_and_no_layer_scale(atto):
    shapes = {v.name[:-2]: v.shape.as_list() for v in atto.variables}
    block = 'convnext_v2_atto/stage_2/block_5'
    assert {name: shape for name, shape in shapes.items() if name.startswith(block + '/')} == {
        f'{block}/depthwise_conv/depthwise_weights': [7, 7, 160, 1],
        f'{block}/depthwise_conv/biases': [160],
        f'{block}/layer_norm/gamma': [160], f'{block}/layer_norm/beta': [160],
        f'{block}/pointwise_conv_1/weights': [160, 640],
        f'{block}/pointwise_conv_1/biases': [640],
        f'{block}/global_response_norm/gamma': [640],
        f'{block}/global_response_norm/beta': [640],
        f'{block}/pointwise_conv_2/weights': [640, 160],
        f'{block}/pointwise_conv_2/biases': [160]}
    assert not [name for name in shapes if 'layer_scale' in name]
    assert {name: shapes[name] for name in shapes if '/block_' not in name} == {
        'convnext_v2_atto/stem/conv/weights': [4, 4, 3, 40],
        'convnext_v2_atto/stem/conv/biases': [40],
        'convnext_v2_atto/stem/layer_norm/gamma': [40],
        'convnext_v2_atto/stem/layer_norm/beta': [40],
        **{f'convnext_v2_atto/stage_{i}/downsample/{name}': shape
           for i, depth in ((1, 80), (2, 160), (3, 320))
           for name, shape in (('layer_norm/gamma', [depth // 2]),
                               ('layer_norm/beta', [depth // 2]),
                               ('conv/weights', [2, 2, depth // 2, depth]),
                               ('conv/biases', [depth]))},
        'convnext_v2_atto/head/layer_norm/gamma': [320],
        'convnext_v2_atto/head/layer_norm/beta': [320],
        'convnext_v2_atto/head/logits/weights': [320, 1000],
        'convnext_v2_atto/head/logits/biases': [1000]}
    blocks = {'/'.join(name.split('/')[1:3]) for name in shapes if '/block_' in name}
    assert len(blocks) == 2 + 2 + 6 + 2
    assert all(v.trainable for v in atto.variables)


def test_end_points(atto):
    logits, end_points = atto(_images(), training=False)
    assert {name: tensor.shape.as_list() for name, tensor in end_points.items()} == {
        'stem': [2, 16, 16, 40], 'stage_0': [2, 16, 16, 40], 'stage_1': [2, 8, 8, 80],
        'stage_2': [2, 4, 4, 160], 'stage_3': [2, 2, 2, 320], 'global_pool': [2, 320],
        'head_norm': [2, 320], 'Logits': [2, 1000], 'Predictions': [2, 1000]}
    assert logits is end_points['Logits']
    np.testing.assert_allclose(end_points['Predictions'].numpy().sum(-1), 1.0, rtol=1e-5)


def test_the_response_norms_change_the_output(atto):
    """A net whose response norms are the identity again gives other logits: the norms
    are in the forward pass."""
    images = _images()
    logits = atto(images, training=False)[0].numpy()
    saved = {v.name: v.numpy() for v in atto.variables if '/global_response_norm/' in v.name}
    try:
        for variable in atto.variables:
            if variable.name in saved:
                variable.assign(tf.zeros_like(variable))
        identity_logits = atto(images, training=False)[0].numpy()
    finally:
        for variable in atto.variables:
            if variable.name in saved:
                variable.assign(saved[variable.name])
    assert np.abs(logits - identity_logits).max() > 1e-2 * np.abs(logits).max()


def test_num_classes_zero_returns_the_normalised_pooled_features(atto):
    features_net = nets_factory.get_network_fn('convnext_v2_atto', 0)
    features_net.build((32, 32, 3))  # the same variables at any size
    assert not [v for v in features_net.variables if '/logits/' in v.name]
    by_name = {v.name: v for v in atto.variables}
    for variable in features_net.variables:
        variable.assign(by_name[variable.name])
    images = _images()
    features, end_points = features_net(images, training=False)
    assert features.shape == [2, 320] and 'Logits' not in end_points
    np.testing.assert_allclose(features, atto(images, training=False)[1]['head_norm'],
                               rtol=1e-5, atol=1e-5)


def test_bfloat16_forward_agrees_with_float32(atto):
    images = _images()
    reference, _ = atto(images, training=False)
    low, end_points = atto(tf.cast(images, tf.bfloat16), training=False)
    assert low.dtype == end_points['stage_3'].dtype == tf.bfloat16
    low, reference = tf.cast(low, tf.float32).numpy(), reference.numpy()
    assert np.abs(low - reference).max() / np.abs(reference).max() < 0.05


def test_variants_are_timms():
    assert convnext_v2.VARIANTS['atto'] == ((2, 2, 6, 2), (40, 80, 160, 320))
    assert convnext_v2.VARIANTS['nano'] == ((2, 2, 8, 2), (80, 160, 320, 640))
    assert convnext_v2.VARIANTS['huge'] == ((3, 3, 27, 3), (352, 704, 1408, 2816))
    for name in VARIANTS:
        spec = nets_factory.get_spec(name)
        assert (spec.default_image_size, spec.preprocessing_name,
                spec.drop_path_option, spec.batch_norm) == (
                    224, 'convnext_v2', 'drop_path_rate', None)


def test_drop_path_rate_is_linear_over_all_blocks():
    net = nets_factory.get_network_fn('convnext_v2_atto', 10, drop_path_rate=0.2)
    rates = [block.drop_path_rate for block in net.residual_blocks]
    np.testing.assert_allclose(rates, np.linspace(0.0, 0.2, 12), rtol=0, atol=1e-12)
