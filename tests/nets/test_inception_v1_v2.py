"""Inception v1 and v2's options, as TF-Slim's inception_v1_test and inception_v2_test
check them. Small inputs run eagerly (faster than tracing, which takes seconds per
net); a test traces only for op names or unknown sizes."""
import numpy as np
import pytest
import tensorflow as tf

from nets import inception_v1, inception_v2, nets_factory

V1_BASE_END_POINTS = {
    'Conv2d_1a_7x7': [112, 112, 64], 'MaxPool_2a_3x3': [56, 56, 64],
    'Conv2d_2b_1x1': [56, 56, 64], 'Conv2d_2c_3x3': [56, 56, 192],
    'MaxPool_3a_3x3': [28, 28, 192], 'Mixed_3b': [28, 28, 256], 'Mixed_3c': [28, 28, 480],
    'MaxPool_4a_3x3': [14, 14, 480], 'Mixed_4b': [14, 14, 512], 'Mixed_4c': [14, 14, 512],
    'Mixed_4d': [14, 14, 512], 'Mixed_4e': [14, 14, 528], 'Mixed_4f': [14, 14, 832],
    'MaxPool_5a_2x2': [7, 7, 832], 'Mixed_5b': [7, 7, 832], 'Mixed_5c': [7, 7, 1024],
}
V2_BASE_END_POINTS = {
    'Conv2d_1a_7x7': [112, 112, 64], 'MaxPool_2a_3x3': [56, 56, 64],
    'Conv2d_2b_1x1': [56, 56, 64], 'Conv2d_2c_3x3': [56, 56, 192],
    'MaxPool_3a_3x3': [28, 28, 192], 'Mixed_3b': [28, 28, 256], 'Mixed_3c': [28, 28, 320],
    'Mixed_4a': [14, 14, 576], 'Mixed_4b': [14, 14, 576], 'Mixed_4c': [14, 14, 576],
    'Mixed_4d': [14, 14, 576], 'Mixed_4e': [14, 14, 576], 'Mixed_5a': [7, 7, 1024],
    'Mixed_5b': [7, 7, 1024], 'Mixed_5c': [7, 7, 1024],
}
ROOT_BLOCK = ['Conv2d_1a_7x7', 'MaxPool_2a_3x3', 'Conv2d_2b_1x1', 'Conv2d_2c_3x3',
              'MaxPool_3a_3x3']
NETS = {'inception_v1': (inception_v1.InceptionV1, V1_BASE_END_POINTS, 5_607_184),
        'inception_v2': (inception_v2.InceptionV2, V2_BASE_END_POINTS, 10_173_112)}


def _trace(net, shape):
    """(logits, end points) as symbolic tensors, for op names and unknown sizes. The
    variables are made eagerly first: a trace that creates them runs twice."""
    net.build([64, 64, 3])
    out = {}
    tf.function(lambda x: out.setdefault('r', net(x))).get_concrete_function(
        tf.TensorSpec(shape, tf.float32))
    return out['r']


def _shapes(end_points):
    return {name: tensor.shape.as_list()[1:] for name, tensor in end_points.items()}


def _zeros(*shape):
    return tf.zeros(shape)


@pytest.mark.parametrize('name', NETS)
def test_base_end_points_shapes_and_parameter_count(name):
    net_class, expected, parameters = NETS[name]
    net = net_class(1000)
    features, end_points = net.base(_zeros(2, 224, 224, 3))
    assert features.shape == [2, 7, 7, 1024]
    assert list(end_points) == list(expected)  # in order
    assert _shapes(end_points) == expected
    assert sum(v.shape.num_elements() for v in net.variables) == parameters


@pytest.mark.parametrize('name', NETS)
def test_base_stops_at_each_final_endpoint(name):
    net_class, expected, _ = NETS[name]
    net = net_class(10)
    names = list(expected)
    for i, final in enumerate(names):
        features, end_points = net.base(_zeros(1, 64, 64, 3), final)
        assert list(end_points) == names[:i + 1]
        assert features is end_points[final]
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        net.base(_zeros(1, 64, 64, 3), 'Mixed_6a')


@pytest.mark.parametrize('name', NETS)
def test_base_without_root_block_starts_at_mixed_3b(name):
    net_class, expected, _ = NETS[name]
    net = net_class(10, include_root_block=False)
    _, end_points = net.base(_zeros(2, 28, 28, 192))
    assert _shapes(end_points) == {k: v for k, v in expected.items() if k not in ROOT_BLOCK}
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        net.base(_zeros(1, 28, 28, 192), 'Conv2d_1a_7x7')


@pytest.mark.parametrize('name, pool', [('inception_v1', 'AvgPool_0a_7x7'),
                                        ('inception_v2', 'AvgPool_1a')])
def test_classes_pre_logits_and_unsqueezed_logits(name, pool):
    images = _zeros(1, 224, 224, 3)
    logits, end_points = nets_factory.get_network_fn(name, 1000)(images)
    assert logits.shape == [1, 1000] and end_points['Predictions'].shape == [1, 1000]
    assert end_points[pool].shape == [1, 1, 1, 1024]
    headless = nets_factory.get_network_fn(name, 0)
    features, end_points = headless(images)
    assert features.shape == [1, 1, 1, 1024] and features is end_points[pool]
    assert not {'PreLogits', 'Logits', 'Predictions'} & set(end_points)
    assert not any('Logits' in v.name for v in headless.variables)
    logits, _ = nets_factory.get_network_fn(name, 25, spatial_squeeze=False)(images)
    assert logits.shape == [1, 1, 1, 25]


@pytest.mark.parametrize('name', NETS)
def test_global_pool_on_unknown_sizes(name):
    net = nets_factory.get_network_fn(name, 10, global_pool=True)
    logits, end_points = _trace(net, [1, None, None, 3])
    assert end_points['global_pool'].shape.as_list() == [1, 1, 1, 1024]
    assert logits.shape.as_list() == [1, 10]
    scope = net.relative_name  # slim's op names
    assert end_points['global_pool'].name.startswith(f'{scope}/Logits/global_pool')
    assert logits.name.startswith(f'{scope}/Logits/SpatialSqueeze')
    # slim's testGlobalPoolUnknownImageShape: run at 250x300.
    logits, end_points = net(_zeros(1, 250, 300, 3))
    assert end_points['Mixed_5c'].shape == [1, 8, 10, 1024] and logits.shape == [1, 10]


def test_v1_half_size_images_need_global_pool_to_classify():
    net = inception_v1.InceptionV1(10)
    features, _ = net.base(_zeros(2, 112, 112, 3))
    assert features.shape == [2, 4, 4, 1024]
    with pytest.raises(ValueError, match='global_pool=True'):
        net(_zeros(1, 112, 112, 3))  # slim's fixed 7x7 VALID window does not fit 4x4
    pooled = inception_v1.InceptionV1(10, global_pool=True)
    logits, _ = pooled(_zeros(1, 112, 112, 3))
    assert logits.shape == [1, 10]


def test_v1_initialisers_follow_slim():
    net = inception_v1.InceptionV1(10, global_pool=True)
    net.build([64, 64, 3])
    weights = {v.name: v.numpy() for v in net.variables}
    # Base: truncated normal of stddev 0.01 (truncation at two stddevs leaves a sample
    # std of 0.88 of it); logits: variance scaling, 0.88 * sqrt(1.3 * 2 / 1024) = 0.044.
    assert weights['InceptionV1/Mixed_4c/Branch_1/Conv2d_0b_3x3/weights:0'].std() == \
        pytest.approx(0.0088, rel=0.02)
    assert weights['InceptionV1/Logits/Conv2d_0c_1x1/weights:0'].std() == \
        pytest.approx(0.044, rel=0.05)


def test_v2_depth_multiplier_scales_every_layer():
    images = _zeros(1, 64, 64, 3)
    _, reference = inception_v2.InceptionV2(10).base(images)
    for multiplier in (0.5, 2.0):
        _, end_points = inception_v2.InceptionV2(10, depth_multiplier=multiplier).base(images)
        for name in V2_BASE_END_POINTS:
            assert end_points[name].shape[-1] == int(reference[name].shape[-1] * multiplier)
    for invalid in (0.0, -0.1):
        with pytest.raises(ValueError, match='depth_multiplier'):
            inception_v2.InceptionV2(10, depth_multiplier=invalid)


def test_v2_thin_first_layer_caps_the_depthwise_multiplier():
    # depth(64) = 16 at a multiplier of 0.25: 16 // 3 = 5 depthwise channels per input.
    net = inception_v2.InceptionV2(10, depth_multiplier=0.25)
    net.base(_zeros(1, 64, 64, 3), 'Conv2d_1a_7x7')
    shapes = {v.name: v.shape.as_list() for v in net.variables}
    assert shapes == {'InceptionV2/Conv2d_1a_7x7/depthwise_weights:0': [7, 7, 3, 5],
                      'InceptionV2/Conv2d_1a_7x7/pointwise_weights:0': [1, 1, 15, 16],
                      'InceptionV2/Conv2d_1a_7x7/biases:0': [16]}


def test_v2_plain_first_layer_without_separable_conv():
    net = inception_v2.InceptionV2(10, use_separable_conv=False)
    _, end_points = net.base(_zeros(1, 224, 224, 3))
    assert _shapes(end_points) == V2_BASE_END_POINTS
    first = sorted(v.name for v in net.variables if '/Conv2d_1a_7x7/' in v.name)
    assert first == ['InceptionV2/Conv2d_1a_7x7/BatchNorm/beta:0',
                     'InceptionV2/Conv2d_1a_7x7/BatchNorm/moving_mean:0',
                     'InceptionV2/Conv2d_1a_7x7/BatchNorm/moving_variance:0',
                     'InceptionV2/Conv2d_1a_7x7/weights:0']


def test_v2_rejects_nchw():
    with pytest.raises(ValueError, match='NHWC'):
        inception_v2.InceptionV2(10, data_format='NCHW')
    with pytest.raises(ValueError, match='NHWC'):
        inception_v2.InceptionV2(10, data_format='NWHC')


def test_v2_small_input_shrinks_the_final_pool():
    net = nets_factory.get_network_fn('inception_v2', 7)
    logits, end_points = _trace(net, [2, 112, 112, 3])
    assert end_points['Mixed_5c'].shape == [2, 4, 4, 1024]
    assert end_points['AvgPool_1a'].shape == [2, 1, 1, 1024]
    assert end_points['AvgPool_1a'].name.startswith('InceptionV2/Logits/AvgPool_1a_4x4/')
    assert end_points['PreLogits'].shape == [2, 1, 1, 1024]
    assert logits.shape == [2, 7]
    logits, end_points = net(_zeros(2, 64, 64, 3))
    assert end_points['Mixed_5c'].shape == [2, 2, 2, 1024]
    assert end_points['AvgPool_1a'].shape == [2, 1, 1, 1024] and logits.shape == [2, 7]


def test_v2_unknown_sizes_keep_the_7x7_pool():
    net = nets_factory.get_network_fn('inception_v2', 7, spatial_squeeze=False)
    logits, end_points = _trace(net, [1, None, None, 3])
    assert end_points['AvgPool_1a'].name.startswith('InceptionV2/Logits/AvgPool_1a_7x7/')
    assert logits.shape.as_list() == [1, None, None, 7]


def test_v2_initialisers_follow_slim():
    # Per branch of Mixed_3b, Mixed_4a, and the root block after its first layer.
    stddevs = inception_v2._initializer_stddevs
    assert [stddevs(b) for b in dict(inception_v2.BLOCKS)['Mixed_3b']] == [
        [None], [0.09, None], [0.09, None, None], [None, 0.1]]
    assert [stddevs(b) for b in dict(inception_v2.BLOCKS)['Mixed_4a']] == [
        [0.09, None], [0.09, None, None], [None]]
    assert stddevs(inception_v2.ROOT_BLOCK) == [None, 0.1, None, None]
    net = inception_v2.InceptionV2(10)
    net.base(_zeros(1, 64, 64, 3), 'Mixed_3b')
    weights = {v.name: v.numpy() for v in net.variables}
    # Truncation at two stddevs leaves a sample std of 0.88 of the stddev.
    assert weights['InceptionV2/Conv2d_1a_7x7/depthwise_weights:0'].std() == \
        pytest.approx(0.88, rel=0.05)
    assert weights['InceptionV2/Mixed_3b/Branch_1/Conv2d_0a_1x1/weights:0'].std() == \
        pytest.approx(0.09 * 0.88, rel=0.03)


def test_weight_decay_skips_v2s_separable_first_layer():
    v2 = inception_v2.InceptionV2(10, weight_decay=0.00004)
    v2.build([64, 64, 3])
    # Every conv and the logits, not the separable first layer (depthwise/pointwise).
    assert len(v2.regularization_losses()) == sum(
        v.name.endswith('/weights:0') for v in v2.variables)
    assert any(v.name.endswith('/pointwise_weights:0') for v in v2.variables)
    v1 = inception_v1.InceptionV1(10, weight_decay=0.00004, global_pool=True)
    v1.build([64, 64, 3])
    expected = sum(0.00004 * np.sum(v.numpy() ** 2) / 2 for v in v1.variables
                   if v.name.endswith('/weights:0'))
    assert float(tf.add_n(v1.regularization_losses())) == pytest.approx(expected, rel=1e-4)
