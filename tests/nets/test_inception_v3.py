"""Inception v3's options, as TF-Slim's inception_v3_test checks them."""
import pytest
import tensorflow as tf

from nets import inception_v3, nets_factory


def _trace(fn, shape):
    out = {}
    tf.function(lambda x: out.setdefault('r', fn(x))).get_concrete_function(
        tf.TensorSpec(shape, tf.float32))
    return out['r']


def test_base_parameter_count_and_end_points():
    net = inception_v3.InceptionV3(1000)
    features, end_points = _trace(lambda x: net.base(x), [2, 299, 299, 3])
    assert features.shape == [2, 8, 8, 2048]
    assert sum(v.shape.num_elements() for v in net.variables) == 21_802_784
    assert list(end_points)[-1] == 'Mixed_7c' and len(end_points) == 18


@pytest.mark.slow  # full-size traces; the zoo test covers the default build
def test_depth_multiplier_thins_every_layer():
    half = inception_v3.InceptionV3(10, depth_multiplier=0.5)
    features, _ = _trace(lambda x: half.base(x), [1, 299, 299, 3])
    assert features.shape[-1] == 1024
    with pytest.raises(ValueError, match='depth_multiplier'):
        inception_v3.InceptionV3(10, depth_multiplier=-0.1)


def test_unknown_final_endpoint_fails():
    net = inception_v3.InceptionV3(10)
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        _trace(lambda x: net.base(x, 'Mixed_8a'), [1, 299, 299, 3])


def test_small_input_shrinks_pooling_kernels():
    net = nets_factory.get_network_fn('inception_v3', 7)
    logits, end_points = net(tf.zeros([1, 107, 107, 3]))
    assert logits.shape == [1, 7] and end_points['AuxLogits'].shape == [1, 7]
    assert end_points['AvgPool_1a'].shape == [1, 1, 1, 2048]
    names = [v.name for v in net.variables]
    assert 'InceptionV3/AuxLogits/Conv2d_2a_1x1/weights:0' in names


@pytest.mark.slow  # full-size traces; the zoo test covers the default build
def test_aux_head_optional_and_pre_logits_without_classes():
    net = inception_v3.InceptionV3(10, create_aux_logits=False)
    _, end_points = _trace(lambda x: net(x), [1, 299, 299, 3])
    assert 'AuxLogits' not in end_points
    headless = inception_v3.InceptionV3(0)
    features, end_points = _trace(lambda x: headless(x), [1, 299, 299, 3])
    assert features.shape == [1, 1, 1, 2048] and 'Logits' not in end_points


@pytest.mark.slow  # full-size traces; the zoo test covers the default build
def test_global_pool_on_unknown_sizes():
    net = inception_v3.InceptionV3(10, global_pool=True)
    logits, end_points = _trace(lambda x: net(x), [1, None, None, 3])
    assert end_points['global_pool'].shape.as_list() == [1, 1, 1, 2048]
    assert logits.shape.as_list() == [1, 10]
