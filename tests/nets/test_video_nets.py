"""I3D and S3D-G: outputs against TF-Slim's on reduced clips, and their options as slim's
i3d_test and s3dg_test check them."""
import json

import numpy as np
import pytest
import tensorflow as tf

from helpers import testing_utils
from nets import layers, nets_factory, video_inception

GOLDEN_DIR = testing_utils.TEST_DATA / 'slim_reference' / 'golden'
BASE_END_POINTS = [name for name, _ in video_inception.ARCHITECTURE]
# slim's variable counts (nets.json) less the logits' 1024 x 1000 weights and 1000 biases.
BASE_PARAMETERS = {'i3d': 13_319_544 - 1_025_000, 's3dg': 10_148_408 - 1_025_000}
BUILDERS = {'i3d': video_inception.i3d, 's3dg': video_inception.s3dg}


def _with_golden_weights(net, clip_shape):
    net.build(clip_shape[1:])
    for variable in net.variables:
        variable.assign(testing_utils.golden_weight_value(variable.name[:-2], variable.shape))
    return net


@pytest.mark.parametrize('golden_name', ['i3d_clip', 's3dg_clip', 's3dg_pyramid_clip'])
def test_outputs_match_slim_on_a_reduced_clip(golden_name):
    golden = np.load(GOLDEN_DIR / f'{golden_name}.npz')
    builder = BUILDERS[golden_name.split('_')[0]]
    net = builder(golden['logits'].shape[-1], **json.loads(str(golden['options'])))
    shape = golden['input_shape'].tolist()
    _with_golden_weights(net, shape)
    clip = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    logits, end_points = net(clip)
    scale = max(1.0, np.abs(golden['logits']).max())
    assert np.abs(logits.numpy() - golden['logits']).max() / scale < 1e-4
    np.testing.assert_allclose(end_points['Predictions'].numpy(), golden['predictions'],
                               atol=1e-4)
    for key, mean, std in zip(golden['endpoint_names'], golden['endpoint_mean'],
                              golden['endpoint_std']):
        assert end_points[key].numpy().mean() == pytest.approx(mean, rel=1e-3, abs=1e-4)
        assert end_points[key].numpy().std() == pytest.approx(std, rel=1e-3, abs=1e-4)


@pytest.mark.parametrize('name', ['i3d', 's3dg'])
def test_base_end_points_and_parameter_count(name):
    net = BUILDERS[name](1000)
    features, end_points = net.base(tf.zeros([2, 16, 64, 64, 3]))
    assert list(end_points) == BASE_END_POINTS
    assert features.shape == [2, 2, 2, 2, 1024]
    assert end_points['Conv2d_1a_7x7'].shape == [2, 8, 32, 32, 64]
    assert sum(v.shape.num_elements() for v in net.variables) == BASE_PARAMETERS[name]
    assert not any('Logits' in v.name for v in net.variables)


def test_base_stops_at_the_final_endpoint():
    net = video_inception.s3dg(10)
    features, end_points = net.base(tf.zeros([1, 4, 64, 64, 3]), 'Mixed_3c')
    assert list(end_points)[-1] == 'Mixed_3c' and features.shape == [1, 2, 8, 8, 480]
    assert not any('Mixed_4b' in v.name for v in net.variables)


def test_unknown_final_endpoint_raises():
    net = video_inception.i3d(10)
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        net.base(tf.zeros([1, 4, 32, 32, 3]), 'Mixed_6a')


@pytest.mark.parametrize('name', ['i3d', 's3dg'])
def test_short_small_clips_shrink_the_final_pool(name):
    net = BUILDERS[name](7)
    logits, end_points = net(tf.random.stateless_uniform([2, 1, 32, 32, 3], seed=[1, 2]))
    assert logits.shape == [2, 7] and end_points['Predictions'].shape == [2, 7]
    assert end_points['Mixed_5c'].shape == [2, 1, 1, 1, 1024]
    np.testing.assert_allclose(end_points['Predictions'].numpy().sum(-1), 1.0, rtol=1e-5)


def test_logits_average_the_classifier_over_time_and_features_without_classes():
    """32 frames of 64x64 leave 3 time steps after the [2, 2, 2] pool: the logits are the
    1x1x1 classifier averaged over them, i.e. applied to the num_classes=0 features."""
    clip = tf.random.stateless_uniform([2, 32, 64, 64, 3], seed=[3, 4], minval=-1)
    headless = video_inception.i3d(0)
    features, end_points = headless(clip)
    assert features.shape == [2, 1, 1, 1024]
    assert 'Logits' not in end_points and 'Predictions' not in end_points
    assert not any('Logits' in v.name for v in headless.variables)
    net = video_inception.i3d(5, spatial_squeeze=False)
    net.build(clip.shape[1:])
    for ours, theirs in zip(sorted(headless.variables, key=lambda v: v.name),
                            sorted([v for v in net.variables if 'Logits' not in v.name],
                                   key=lambda v: v.name)):
        theirs.assign(ours)
    logits, end_points = net(clip)
    assert end_points['Mixed_5c'].shape == [2, 4, 2, 2, 1024]
    assert logits.shape == [2, 1, 1, 5]
    expected = tf.tensordot(features, net.logits.weights[0, 0, 0], 1) + net.logits.biases
    np.testing.assert_allclose(logits.numpy(), expected.numpy(), rtol=1e-4, atol=1e-5)


def _gated_and_temporal_scopes(net):
    net(tf.zeros([1, 2, 32, 32, 3]))
    names = [v.name[len('InceptionV1/'):-len(':0')] for v in net.variables]
    gated = {n[:-len('/self_gating/transformer_W/weights')] for n in names
             if 'self_gating' in n}
    temporal = {n[:-len('/temporal/weights')] for n in names if n.endswith('temporal/weights')}
    return gated, temporal


def _branch_ends(block):
    return {f'{block}/Branch_0/Conv2d_0a_1x1', f'{block}/Branch_1/Conv2d_0b_3x3',
            f'{block}/Branch_2/Conv2d_0b_3x3', f'{block}/Branch_3/Conv2d_0b_1x1'}


BLOCKS = [name for name in BASE_END_POINTS if name.startswith('Mixed')]


def test_gating_and_separable_convs_sit_where_slim_puts_them():
    gated, temporal = _gated_and_temporal_scopes(video_inception.s3dg(10))
    assert gated == {'Conv2d_2c_3x3'}.union(*(_branch_ends(b) for b in BLOCKS))
    assert temporal == {'Conv2d_2c_3x3'} | {f'{b}/Branch_{i}/Conv2d_0b_3x3'
                                            for b in BLOCKS for i in (1, 2)}
    assert _gated_and_temporal_scopes(video_inception.i3d(10)) == (set(), set())
    # An inverted pyramid: 2-D convs and no gating until the blocks named.
    late = video_inception.s3dg(10, temporal_conv_startat='Mixed_4e', gating_startat='Mixed_5b')
    gated, temporal = _gated_and_temporal_scopes(late)
    assert gated == _branch_ends('Mixed_5b') | _branch_ends('Mixed_5c')
    assert {t.split('/')[0] for t in temporal} == {'Mixed_4e', 'Mixed_4f', 'Mixed_5b',
                                                   'Mixed_5c'}
    shapes = {v.name: v.shape.as_list() for v in late.variables}
    assert shapes['InceptionV1/Mixed_4d/Branch_1/Conv2d_0b_3x3/weights:0'] == [1, 3, 3, 128, 256]
    assert shapes['InceptionV1/Conv2d_1a_7x7/weights:0'] == [3, 7, 7, 3, 64]


def test_i3d_inflates_every_3x3_and_its_stem_spans_7_frames():
    net = video_inception.i3d(10)
    net(tf.zeros([1, 2, 32, 32, 3]))
    shapes = {v.name: v.shape.as_list() for v in net.variables}
    assert shapes['InceptionV1/Conv2d_1a_7x7/weights:0'] == [7, 7, 7, 3, 64]
    assert shapes['InceptionV1/Conv2d_2c_3x3/weights:0'] == [3, 3, 3, 64, 192]
    assert shapes['InceptionV1/Mixed_3b/Branch_2/Conv2d_0b_3x3/weights:0'] == [3, 3, 3, 16, 32]


def test_fresh_temporal_convs_copy_the_centre_frame_and_batch_norm_is_unfused():
    net = video_inception.s3dg(10)
    net(tf.zeros([1, 2, 32, 32, 3]))
    temporal = [v for v in net.variables if v.name.endswith('temporal/weights:0')]
    assert len(temporal) == 19
    for variable in temporal:
        expected = np.zeros(variable.shape, np.float32)
        expected[1, 0, 0] = np.eye(variable.shape[-1])
        np.testing.assert_array_equal(variable.numpy(), expected)
    norms = list(net._flatten(predicate=lambda m: isinstance(m, layers.BatchNorm)))
    assert len(norms) == 57
    assert {norm.params for norm in norms} == {layers.BatchNormParams(
        decay=0.999, epsilon=0.001, center=True, scale=False, fused=False)}


@pytest.mark.parametrize('name, decayed', [('i3d', 57 + 1), ('s3dg', 57 + 19 + 37 + 1)])
def test_every_weight_decays_and_no_bias(name, decayed):
    """slim's arg_scopes regularise every conv3d: batch-normalised convs, temporal convs,
    gating transformers and the logits."""
    net = BUILDERS[name](10, weight_decay=1e-7)
    net(tf.zeros([1, 2, 32, 32, 3]))
    assert len(net.regularization_losses()) == decayed
    assert len([v for v in net.variables if v.name.endswith('weights:0')]) == decayed


def test_depth_multiplier_and_min_depth():
    net = video_inception.s3dg(10, depth_multiplier=0.1, min_depth=16)
    _, end_points = net(tf.zeros([1, 2, 32, 32, 3]))
    assert end_points['Conv2d_1a_7x7'].shape[-1] == 16
    assert end_points['Mixed_3b'].shape[-1] == 4 * 16
    assert end_points['Mixed_5c'].shape[-1] == 38 + 38 + 16 + 16  # int(0.1 * depth)


@pytest.mark.parametrize('options, message', [
    (dict(first_temporal_kernel_size=4), 'first_temporal_kernel_size'),
    (dict(temporal_conv_startat='Mixed_6a'), 'temporal_conv_startat'),
    (dict(gating_startat='Conv2d_2b_1x1'), 'gating_startat'),
    (dict(depth_multiplier=0.0), 'depth_multiplier'),
    (dict(dropout_keep_prob=0.0), 'dropout_keep_prob'),
])
def test_invalid_options_raise(options, message):
    with pytest.raises(ValueError, match=message):
        video_inception.s3dg(10, **options)


def test_images_instead_of_clips_raise():
    with pytest.raises(ValueError, match='clips'):
        video_inception.i3d(10)(tf.zeros([1, 32, 32, 3]))


@pytest.mark.parametrize('name', ['i3d', 's3dg'])
def test_spec_takes_64_frame_clips_without_a_zoo_checkpoint(name):
    spec = nets_factory.get_spec(name)
    assert spec.input_shape() == (64, 224, 224, 3)
    assert spec.preprocessing_name == 'inception'
    assert spec.checkpoint_num_classes is None and spec.checkpoint_file is None
