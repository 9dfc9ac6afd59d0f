"""Vision Transformers (nets/vit): sizes against timm's, variable names, end points, the
feature extractor, position-embedding resampling, stochastic depth, bfloat16 and
quantization. The nets run at 32x32 (a 2x2 grid) here; logits against timm's are in
tests/nets/timm_import/."""
import numpy as np
import pytest
import tensorflow as tf

from core.errors import UsageError
from nets import nets_factory
from nets.layers.fake_quant import QuantizationParams
from nets.vit import model, position_embedding

SIZE = 32

# Every parameter of timm's model at 224x224 with 1,000 classes (DINOv2's at 224 too,
# not at its 518 default), counted once with timm 1.0.31 (/work/timm_venv):
#   m = timm.create_model(timm_name, img_size=224, num_classes=1000)
#   sum(p.numel() for p in m.parameters())
TIMM_PARAMETERS = {
    'vit_tiny_16': ('vit_tiny_patch16_224', 5_717_416),
    'vit_small_16': ('vit_small_patch16_224', 22_050_664),
    'vit_base_16': ('vit_base_patch16_224', 86_567_656),
    'vit_base_32': ('vit_base_patch32_224', 88_224_232),
    'vit_large_16': ('vit_large_patch16_224', 304_326_632),
    'dinov2_small_14': ('vit_small_patch14_dinov2', 22_013_800),
    'dinov2_base_14': ('vit_base_patch14_dinov2', 86_493_928),
    'dinov2_large_14': ('vit_large_patch14_dinov2', 304_252_904),
    'dinov2_small_14_reg4': ('vit_small_patch14_reg4_dinov2', 22_014_952),
    'dinov2_base_14_reg4': ('vit_base_patch14_reg4_dinov2', 86_496_232),
    'dinov2_large_14_reg4': ('vit_large_patch14_reg4_dinov2', 304_255_976),
}
FAST_COUNTS = ('vit_tiny_16', 'dinov2_small_14_reg4')


def _images(batch=2, size=SIZE, seed=(1, 2)):
    return tf.random.stateless_uniform([batch, size, size, 3], seed=seed, minval=-1)


def _parameter_count(net):
    return sum(v.shape.num_elements() for v in net.variables)


def _copy_weights(source, target):
    by_name = {v.name: v for v in source.variables}
    for variable in target.variables:
        if variable.name in by_name and variable.shape == by_name[variable.name].shape:
            variable.assign(by_name[variable.name])


@pytest.fixture(scope='module')
def tiny():
    """vit_tiny_16 with 10 classes, built at SIZE, random (not initial) tokens."""
    net = nets_factory.get_network_fn('vit_tiny_16', 10)
    net.build((SIZE, SIZE, 3))
    rng = np.random.default_rng(0)
    for variable in (net.class_token, net.position_embedding):
        variable.assign(rng.normal(0, 0.5, variable.shape).astype(np.float32))
    return net


@pytest.mark.parametrize('name', [n if n in FAST_COUNTS else
                                  pytest.param(n, marks=pytest.mark.slow)
                                  for n in TIMM_PARAMETERS])
def test_parameter_count_equals_timms(name):
    net = nets_factory.get_network_fn(name, 1000)
    net.build((224, 224, 3))
    assert _parameter_count(net) == TIMM_PARAMETERS[name][1]


def test_variables_are_named_by_block(tiny):
    shapes = {v.name[:-2]: v.shape.as_list() for v in tiny.variables}
    block = 'vit_tiny_16/block_11'
    assert {n: s for n, s in shapes.items() if n.startswith(block + '/')} == {
        f'{block}/layer_norm_1/gamma': [192], f'{block}/layer_norm_1/beta': [192],
        f'{block}/attention/qkv/weights': [192, 576], f'{block}/attention/qkv/biases': [576],
        f'{block}/attention/projection/weights': [192, 192],
        f'{block}/attention/projection/biases': [192],
        f'{block}/layer_norm_2/gamma': [192], f'{block}/layer_norm_2/beta': [192],
        f'{block}/mlp/fc_1/weights': [192, 768], f'{block}/mlp/fc_1/biases': [768],
        f'{block}/mlp/fc_2/weights': [768, 192], f'{block}/mlp/fc_2/biases': [192]}
    assert {n: s for n, s in shapes.items() if '/block_' not in n} == {
        'vit_tiny_16/patch_embedding/conv/weights': [16, 16, 3, 192],
        'vit_tiny_16/patch_embedding/conv/biases': [192],
        'vit_tiny_16/class_token': [1, 1, 192],
        'vit_tiny_16/position_embedding': [1, 1 + 4, 192],
        'vit_tiny_16/final_norm/gamma': [192], 'vit_tiny_16/final_norm/beta': [192],
        'vit_tiny_16/head/logits/weights': [192, 10],
        'vit_tiny_16/head/logits/biases': [10]}
    assert len({n.split('/')[1] for n in shapes if '/block_' in n}) == 12
    assert all(v.trainable for v in tiny.variables)
    assert nets_factory.get_spec('vit_tiny_16').batch_norm is None


def test_end_points(tiny):
    logits, end_points = tiny(_images(), training=False)
    assert {n: t.shape.as_list() for n, t in end_points.items()} == {
        'patch_embedding': [2, 2, 2, 192],
        **{f'block_{i}': [2, 5, 192] for i in range(12)},
        'encoder_norm': [2, 5, 192], 'pre_logits': [2, 192], 'Logits': [2, 10],
        'Predictions': [2, 10]}
    assert logits is end_points['Logits']
    np.testing.assert_allclose(end_points['pre_logits'], end_points['encoder_norm'][:, 0])


def test_num_classes_zero_returns_the_class_tokens_features(tiny):
    features_net = nets_factory.get_network_fn('vit_tiny_16', 0)
    features_net.build((SIZE, SIZE, 3))
    assert not [v for v in features_net.variables if '/head/' in v.name]
    _copy_weights(tiny, features_net)
    images = _images()
    features, end_points = features_net(images, training=False)
    assert features.shape == [2, 192] and 'Logits' not in end_points
    np.testing.assert_allclose(features, tiny(images, training=False)[1]['pre_logits'],
                               rtol=1e-5, atol=1e-5)


def test_base_stops_at_the_end_point_asked_for(tiny):
    images = _images()
    features, end_points = tiny.base(images, training=False)
    assert list(end_points)[-1] == 'encoder_norm' and features.shape == [2, 5, 192]
    features, end_points = tiny.base(images, final_endpoint='block_3', training=False)
    assert list(end_points)[-1] == 'block_3'
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        tiny.base(images, final_endpoint='stage_3', training=False)


def test_another_image_size_resamples_the_position_embedding(tiny):
    """Called at 48 (a 3x3 grid), the net equals one built at 48 holding the resampled
    embedding (the restore path's)."""
    images = _images(size=48)
    logits, _ = tiny(images, training=False)
    at_48 = nets_factory.get_network_fn('vit_tiny_16', 10)
    at_48.build((48, 48, 3))
    _copy_weights(tiny, at_48)
    stored = tiny.position_embedding.numpy()
    at_48.position_embedding.assign(at_48.resample_restored(at_48.position_embedding, stored))
    np.testing.assert_allclose(at_48(images, training=False)[0], logits, rtol=1e-5,
                               atol=1e-5)
    assert at_48.resample_restored(at_48.class_token, stored) is None


def test_sizes_that_are_no_multiple_of_the_patch_are_refused_in_one_line(tiny):
    with pytest.raises(UsageError, match=r'multiples of its patch size, 16; got 40x40\. '
                                         r'Pass an --image_size such as 32\.'):
        tiny(_images(size=40), training=False)


def test_resampling_keeps_the_prefix_and_a_constant_grid():
    embedding = np.concatenate([np.full((1, 2, 3), 7.0), np.full((1, 16, 3), 0.25)], 1)
    resampled = position_embedding.resample_array(embedding, (6, 6), 2)
    assert resampled.shape == (1, 2 + 36, 3)
    np.testing.assert_allclose(resampled[:, :2], 7.0)
    np.testing.assert_allclose(resampled[:, 2:], 0.25, rtol=1e-6)
    np.testing.assert_array_equal(position_embedding.resample_array(embedding, (4, 4), 2),
                                  embedding.astype(np.float32))
    with pytest.raises(ValueError, match='no square grid'):
        position_embedding.resample_array(embedding[:, :-1], (2, 2), 2)


def test_dinov2_registers_layer_scale_and_patch_only_embedding():
    net = nets_factory.get_network_fn('dinov2_small_14_reg4', 0)
    features, end_points = net(_images(batch=1, size=28), training=False)
    assert features.shape == [1, 384]
    assert end_points['block_0'].shape == [1, 1 + 4 + 4, 384]
    shapes = {v.name[:-2]: v.shape.as_list() for v in net.variables}
    assert shapes['dinov2_small_14_reg4/register_tokens'] == [1, 4, 384]
    assert shapes['dinov2_small_14_reg4/position_embedding'] == [1, 4, 384]
    assert shapes['dinov2_small_14_reg4/patch_embedding/conv/weights'] == [14, 14, 3, 384]
    scales = [v for v in net.variables if 'layer_scale' in v.name]
    assert len(scales) == 24
    np.testing.assert_allclose(scales[0].numpy(), 1e-5)


def test_drop_path_follows_the_linear_rule_and_only_in_training():
    net = nets_factory.get_network_fn('vit_tiny_16', 10, is_training=True,
                                      drop_path_rate=0.5)
    assert [b.drop_path_rate for b in net.residual_blocks] == pytest.approx(
        list(np.linspace(0, 0.5, 12)))
    images = _images()
    generator = tf.random.Generator.from_seed(3)
    first, _ = net(images, random_generator=generator)
    second, _ = net(images, random_generator=generator)
    assert not np.allclose(first, second)
    np.testing.assert_array_equal(net(images, training=False)[0],
                                  net(images, training=False)[0])


def test_bfloat16_logits_agree_with_float32(tiny):
    images = _images()
    logits, _ = tiny(images, training=False)
    low, _ = tiny(tf.cast(images, tf.bfloat16), training=False)
    assert low.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(low, tf.float32), logits, rtol=0.05,
                               atol=0.05 * np.abs(logits).max())


def test_weight_decay_covers_conv_and_dense_weights_only():
    net = nets_factory.get_network_fn('vit_tiny_16', 10, weight_decay=0.05)
    net.build((SIZE, SIZE, 3))
    weights = [v for v in net.variables if v.name.endswith('weights:0')]
    assert len(weights) == 1 + 12 * 4 + 1
    assert len(net.regularization_losses()) == len(weights)


def test_quantization_aware_build_runs():
    net = nets_factory.get_network_fn('vit_tiny_16', 10, is_training=True,
                                      quantization=QuantizationParams(delay=0))
    logits, _ = net(_images(), training=True, step=tf.constant(1, tf.int64))
    assert np.isfinite(logits.numpy()).all()
    assert any('act_quant' in v.name for v in net.variables)


def test_average_pooling_normalises_the_mean_of_the_patches():
    net = model.VisionTransformer(5, patch_size=16, depth=192, num_blocks=1, num_heads=3,
                                  scope='pooled', pooling='avg')
    features, end_points = net(_images(), training=False)
    assert 'encoder_norm' not in end_points and end_points['pre_logits'].shape == [2, 192]
    pooled = tf.reduce_mean(end_points['block_0'][:, 1:], axis=1)
    np.testing.assert_allclose(end_points['pre_logits'], net.final_norm(pooled),
                               rtol=1e-5, atol=1e-5)


def test_registry_specs():
    for name in TIMM_PARAMETERS:
        spec = nets_factory.get_spec(name)
        family = 'dinov2' if name.startswith('dinov2') else 'vit'
        assert (spec.default_image_size, spec.preprocessing_name,
                spec.drop_path_option) == (224, family, 'drop_path_rate')
