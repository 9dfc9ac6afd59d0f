"""ResNet options, as TF-Slim's resnet_v1_test / resnet_v2_test check them."""
import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils

from nets import nets_factory, resnet


def _golden(net):
    for variable in net.variables:
        variable.assign(testing_utils.golden_weight_value(variable.name[:-2], variable.shape))


@pytest.mark.parametrize('version', [1, 2])
@pytest.mark.parametrize('output_stride', [8, 16])
def test_atrous_features_are_the_dense_ones_subsampled(version, output_stride):
    # Slim's testAtrousValuesBottleneck on small blocks: with explicit padding and odd
    # sizes the dense grid is a subgrid of the atrous one.
    blocks = resnet.bottleneck_blocks((2, 2, 2, 2), base_depths=(4, 8, 16, 32))
    images = tf.random.stateless_uniform([1, 65, 65, 3], seed=[2, 3])
    dense = resnet.ResNet(None, blocks=blocks, version=version, scope='resnet')
    atrous = resnet.ResNet(None, blocks=blocks, version=version, scope='resnet',
                           output_stride=output_stride)
    dense_features, _ = dense.base(images, training=False)
    atrous.base(images, training=False)
    _golden(dense)
    _golden(atrous)
    dense_features, _ = dense.base(images, training=False)
    atrous_features, _ = atrous.base(images, training=False)
    factor = 32 // output_stride
    np.testing.assert_allclose(atrous_features.numpy()[:, ::factor, ::factor],
                               dense_features.numpy(), rtol=1e-4,
                               atol=1e-4 * np.abs(dense_features.numpy()).max())


def test_output_stride_must_be_reachable_and_a_multiple_of_4():
    blocks = resnet.bottleneck_blocks((1, 1, 1, 1))
    with pytest.raises(ValueError, match='multiple of 4'):
        resnet.ResNet(10, blocks=blocks, version=1, scope='r', output_stride=6)


@pytest.mark.parametrize('name', [
    pytest.param(f'resnet_v{v}_{n}', marks=[pytest.mark.slow] if n > 50 else [])
    for v in (1, 2) for n in (50, 101, 152, 200)])
def test_every_variant_builds_small_without_a_root_block(name):
    net = nets_factory.get_network_fn(name, 3, include_root_block=False,
                                      spatial_squeeze=False)
    out = {}
    tf.function(lambda x: out.setdefault('r', net(x))).get_concrete_function(
        tf.TensorSpec([1, 16, 16, 3]))
    logits, end_points = out['r']
    assert logits.shape == [1, 1, 1, 3]
    assert end_points[f'{name}/block4'].shape == [1, 2, 2, 2048]
    assert f'{name}/conv1' not in end_points


def test_pre_logits_and_unknown_final_endpoint():
    net = nets_factory.get_network_fn('resnet_v2_50', 0)
    features, end_points = net(tf.zeros([1, 64, 64, 3]))
    assert features.shape == [1, 1, 1, 2048] and 'global_pool' in end_points
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        net.base(tf.zeros([1, 64, 64, 3]), 'block5')
