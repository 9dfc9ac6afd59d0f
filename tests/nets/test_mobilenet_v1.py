"""MobileNet v1's options, as TF-Slim's mobilenet_v1_test checks them."""
import numpy as np
import pytest
import tensorflow as tf

from nets import mobilenet_v1, nets_factory


def _trace(fn, shape):
    out = {}
    tf.function(lambda x: out.setdefault('r', fn(x))).get_concrete_function(
        tf.TensorSpec(shape, tf.float32))
    return out['r']


def test_base_parameter_count_is_slims():
    net = mobilenet_v1.MobileNetV1(1000)
    features, end_points = _trace(lambda x: net.base(x), [2, 224, 224, 3])
    assert features.shape == [2, 7, 7, 1024]
    # slim's test counted under a bare batch_norm arg scope (scale=False): no gammas.
    assert sum(v.shape.num_elements() for v in net.variables
               if not v.name.endswith('gamma:0')) == 3_217_920
    assert len(end_points) == 27


@pytest.mark.parametrize('output_stride, size', [(8, 28), (16, 14), (32, 7)])
@pytest.mark.parametrize('explicit', [False, True])
def test_output_stride_keeps_resolution(output_stride, size, explicit):
    net = mobilenet_v1.MobileNetV1(10, output_stride=output_stride,
                                   use_explicit_padding=explicit)
    features, _ = _trace(lambda x: net.base(x), [1, 224, 224, 3])
    assert features.shape == [1, size, size, 1024]


def test_atrous_features_equal_dense_ones_where_both_are_computed():
    images = tf.random.stateless_uniform([1, 64, 64, 3], seed=[1, 2])
    dense = mobilenet_v1.MobileNetV1(10, depth_multiplier=0.25)
    atrous = mobilenet_v1.MobileNetV1(10, depth_multiplier=0.25, output_stride=16,
                                      use_explicit_padding=True)
    dense_explicit = mobilenet_v1.MobileNetV1(10, depth_multiplier=0.25,
                                              use_explicit_padding=True)
    dense_features, _ = dense_explicit.base(images, 'Conv2d_11_pointwise')
    atrous.base(images, 'Conv2d_11_pointwise')
    for a, b in zip(atrous.variables, dense_explicit.variables):
        a.assign(b)
    atrous_features, _ = atrous.base(images, 'Conv2d_11_pointwise')
    # Up to Conv2d_11 the stride is 16 in both: the same function.
    np.testing.assert_allclose(atrous_features, dense_features, rtol=1e-5, atol=1e-5)
    del dense


def test_depth_multiplier_and_min_depth():
    net = mobilenet_v1.MobileNetV1(10, depth_multiplier=0.1, min_depth=16)
    _, end_points = _trace(lambda x: net.base(x), [1, 64, 64, 3])
    assert end_points['Conv2d_0'].shape[-1] == 16  # int(32 * 0.1) = 3 -> min_depth
    assert end_points['Conv2d_13_pointwise'].shape[-1] == 102
    with pytest.raises(ValueError, match='depth_multiplier'):
        mobilenet_v1.MobileNetV1(10, depth_multiplier=0.0)


def test_every_end_point_is_a_final_endpoint_and_unknown_ones_fail():
    net = mobilenet_v1.MobileNetV1(10, depth_multiplier=0.25)
    names = [name for name, _ in net.blocks]
    images = tf.zeros([1, 32, 32, 3])
    for name in names:
        features, end_points = net.base(images, name)
        assert list(end_points) == names[:names.index(name) + 1]
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        net.base(images, 'Conv2d_14_pointwise')


def test_small_input_shrinks_the_pooling_kernel_and_global_pool():
    net = nets_factory.get_network_fn('mobilenet_v1', 5)
    logits, end_points = net(tf.zeros([2, 96, 96, 3]))
    assert end_points['AvgPool_1a'].shape == [2, 1, 1, 1024] and logits.shape == [2, 5]
    pooled = nets_factory.get_network_fn('mobilenet_v1_025', 5, global_pool=True)
    logits, end_points = _trace(lambda x: pooled(x), [1, None, None, 3])
    assert end_points['global_pool'].shape.as_list() == [1, 1, 1, 256]
    assert logits.shape.as_list() == [1, 5]


def test_weight_decay_skips_depthwise_weights():
    net = nets_factory.get_network_fn('mobilenet_v1', 10, weight_decay=0.00004)
    net.build((32, 32, 3))
    # 1 first conv + 13 pointwise + logits; no depthwise.
    assert len(net.regularization_losses()) == 15
