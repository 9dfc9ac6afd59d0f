"""The plain conv nets' options, as TF-Slim's vgg, alexnet and overfeat tests check them."""
import pytest
import tensorflow as tf

from nets import nets_factory


def test_fully_convolutional_on_bigger_inputs():
    net = nets_factory.get_network_fn('vgg_a', 7, fc_conv_padding='SAME',
                                      spatial_squeeze=False)
    logits, end_points = net(tf.zeros([1, 64, 64, 3]))
    assert logits.shape == [1, 2, 2, 7]
    assert end_points['vgg_a/fc8'].shape == [1, 2, 2, 7]


def test_global_pool_and_pre_logits():
    net = nets_factory.get_network_fn('vgg_a', 0, fc_conv_padding='SAME', global_pool=True)
    features, end_points = net(tf.zeros([1, 64, 64, 3]))
    assert features.shape == [1, 1, 1, 4096] and 'global_pool' in end_points
    assert 'vgg_a/fc8' not in end_points


def test_base_stops_at_any_end_point_and_rejects_unknown_ones():
    net = nets_factory.get_network_fn('vgg_16', 10)
    features, end_points = net.base(tf.zeros([1, 32, 32, 3]), 'vgg_16/conv3/conv3_2')
    assert features.shape == [1, 8, 8, 256] and len(end_points) == 8
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        net.base(tf.zeros([1, 32, 32, 3]), 'vgg_16/conv3/conv3_4')


def test_weight_decay_on_every_weight():
    net = nets_factory.get_network_fn('vgg_19', 10, weight_decay=0.0005,
                                      fc_conv_padding='SAME')
    net.build((32, 32, 3))
    assert len(net.regularization_losses()) == 19


@pytest.mark.parametrize('name, size, grid', [('alexnet_v2', 300, 4), ('overfeat', 281, 2)])
def test_alexnet_and_overfeat_run_fully_convolutionally(name, size, grid):
    net = nets_factory.get_network_fn(name, 4, spatial_squeeze=False)
    logits, end_points = net(tf.zeros([1, size, size, 3]))
    assert logits.shape == [1, grid, grid, 4]
    assert list(end_points)[-1] == f'{name}/fc8'
