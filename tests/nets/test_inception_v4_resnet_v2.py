"""Inception v4 and Inception-ResNet-v2's options, as TF-Slim's inception_v4_test and
inception_resnet_v2_test check them. Eager builds (a traced 299 build of these nets
takes 15-30 s; the zoo tests in test_nets.py do it once per mode)."""
import numpy as np
import pytest
import tensorflow as tf

from nets import heads, inception_blocks, inception_resnet_v2, inception_v4, layers
from nets.inception_resnet_v2 import InceptionResnetV2
from nets.inception_v4 import InceptionV4

V4_ENDPOINTS = ['Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3', 'Mixed_3a', 'Mixed_4a',
                'Mixed_5a', 'Mixed_5b', 'Mixed_5c', 'Mixed_5d', 'Mixed_5e', 'Mixed_6a',
                'Mixed_6b', 'Mixed_6c', 'Mixed_6d', 'Mixed_6e', 'Mixed_6f', 'Mixed_6g',
                'Mixed_6h', 'Mixed_7a', 'Mixed_7b', 'Mixed_7c', 'Mixed_7d']
IRV2_ENDPOINTS = ['Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3', 'MaxPool_3a_3x3',
                  'Conv2d_3b_1x1', 'Conv2d_4a_3x3', 'MaxPool_5a_3x3', 'Mixed_5b', 'Mixed_6a',
                  'PreAuxLogits', 'Mixed_7a', 'Conv2d_7b_1x1']
# slim's shapes up to PreAuxLogits at 299 (batch dropped): default, aligned, stride 8.
IRV2_SHAPES_TO_PRE_AUX = {
    'default': [149, 147, 147, 73, 73, 71, 35, 35, 17, 17],
    'align_feature_maps': [150, 150, 150, 75, 75, 75, 38, 38, 19, 19],
    'output_stride_8': [149, 147, 147, 73, 73, 71, 35, 35, 33, 33],
}
IRV2_DEPTHS_TO_PRE_AUX = [32, 32, 64, 64, 80, 192, 192, 320, 1088, 1088]


def _images(height, width, batch=1, channels=3):
    return tf.constant(np.random.default_rng(0).uniform(
        -1, 1, (batch, height, width, channels)), tf.float32)


# --- Inception v4 ---

def test_v4_half_size_images_give_3x3_features_and_every_end_point():
    net = InceptionV4(1000, weight_decay=0.0004)
    logits, end_points = net(_images(150, 150, batch=2))
    assert logits.shape == [2, 1000] and end_points['AuxLogits'].shape == [2, 1000]
    assert list(end_points) == V4_ENDPOINTS + ['AuxLogits', 'global_pool',
                                              'PreLogitsFlatten', 'Logits', 'Predictions']
    assert end_points['Mixed_7d'].shape == [2, 3, 3, 1536]
    assert end_points['global_pool'].shape == [2, 1, 1, 1536]
    assert end_points['PreLogitsFlatten'].shape == [2, 1536]
    shapes = {v.name: v.shape.as_list() for v in net.variables}
    # The aux conv spans the pooled map, 1x1 here, under its fixed name.
    assert shapes['InceptionV4/AuxLogits/Conv2d_2a/weights:0'] == [1, 1, 128, 768]
    assert shapes['InceptionV4/AuxLogits/Aux_logits/weights:0'] == [768, 1000]
    assert shapes['InceptionV4/Logits/Logits/weights:0'] == [1536, 1000]
    # inception_arg_scope decays weights only (the two classifiers have biases).
    weights = [v for v in net.trainable_variables if v.name.endswith('weights:0')]
    assert len(net.regularization_losses()) == len(weights)
    assert sum(v.name.endswith('biases:0') for v in net.variables) == 2


def test_v4_base_stops_at_its_final_endpoint_and_fails_on_unknown_ones():
    net = InceptionV4(10)
    images = _images(75, 75)
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        net.base(images, 'Mixed_8a')
    for final_endpoint in ['Conv2d_2b_3x3', 'Mixed_5a', 'Mixed_6h', 'Mixed_7d']:
        features, end_points = net.base(images, final_endpoint)
        assert list(end_points) == V4_ENDPOINTS[:V4_ENDPOINTS.index(final_endpoint) + 1]
        assert features is end_points[final_endpoint]
    assert features.shape == [1, 1, 1, 1536]
    assert not any('Logits' in v.name for v in net.variables)


def test_v4_pools_whole_map_of_larger_images():
    net = InceptionV4(10, create_aux_logits=False)
    logits, end_points = net(_images(350, 400))
    assert end_points['Mixed_7d'].shape == [1, 9, 11, 1536]
    assert end_points['global_pool'].shape == [1, 1, 1, 1536] and logits.shape == [1, 10]
    assert 'AuxLogits' not in end_points
    assert not any('AuxLogits' in v.name for v in net.variables)
    np.testing.assert_allclose(end_points['global_pool'][0, 0, 0],
                               tf.reduce_mean(end_points['Mixed_7d'], [0, 1, 2]),
                               rtol=1e-5, atol=1e-6)


def test_v4_without_classes_returns_pooled_features():
    net = InceptionV4(0)
    features, end_points = net(_images(107, 107))  # the smallest input its aux pool takes
    assert features.shape == [1, 1, 1, 1536]
    assert 'Logits' not in end_points and 'AuxLogits' not in end_points
    assert not any('Logits' in v.name for v in net.variables)


def test_whole_map_average_of_unknown_size_is_a_mean():
    pool = tf.function(heads.whole_map_average).get_concrete_function(
        tf.TensorSpec([2, None, None, 4]))
    assert pool.output_shapes.as_list() == [2, 1, 1, 4]
    maps = _images(5, 7, batch=2)
    np.testing.assert_allclose(pool(maps), tf.reduce_mean(maps, [1, 2], keepdims=True),
                               rtol=1e-6)
    np.testing.assert_allclose(heads.whole_map_average(maps), pool(maps), rtol=1e-6)


def test_aux_head_needs_a_known_map_size_and_keeps_its_first():
    def conv(name, depth, kernel, stride=1, padding='SAME'):
        return layers.Conv2D(name, depth, kernel, stride=stride, padding=padding)
    head = inception_blocks.AuxHead(conv, conv_name='Conv2d_2a',
                                logits=layers.FullyConnected('Aux_logits', 5))
    with pytest.raises(ValueError, match='known input height and width'):
        tf.function(lambda x: head(x, training=False)).get_concrete_function(
            tf.TensorSpec([1, None, None, 8]))
    head = inception_blocks.AuxHead(conv, conv_name='Conv2d_2a',
                                logits=layers.FullyConnected('Aux_logits', 5))
    assert head(tf.zeros([1, 17, 17, 8]), training=False).shape == [1, 5]
    assert head.conv_2a.weights.shape == [5, 5, 128, 768]
    with pytest.raises(ValueError, match='one input size'):
        head(tf.zeros([1, 8, 8, 8]), training=False)


# --- Inception-ResNet-v2 ---

@pytest.mark.parametrize('option', list(IRV2_SHAPES_TO_PRE_AUX))
def test_irv2_end_points_up_to_pre_aux_logits(option):
    options = {'default': {}, 'align_feature_maps': dict(align_feature_maps=True),
               'output_stride_8': dict(output_stride=8)}[option]
    net = InceptionResnetV2(10, **options)
    _, end_points = net.base(_images(299, 299), 'PreAuxLogits')
    expected = {name: [1, size, size, depth] for name, size, depth in zip(
        IRV2_ENDPOINTS, IRV2_SHAPES_TO_PRE_AUX[option], IRV2_DEPTHS_TO_PRE_AUX)}
    assert {k: v.shape.as_list() for k, v in end_points.items()} == expected


def _convs(module):
    return module._flatten(predicate=lambda m: isinstance(m, layers.Conv2D))


def test_irv2_output_stride_8_dilates_the_17x17_blocks_and_stops_at_pre_aux_logits():
    net = InceptionResnetV2(10, output_stride=8)
    with pytest.raises(ValueError, match="output_stride=8 reaches 'PreAuxLogits'"):
        net(_images(107, 107))  # as slim, which supports it up to PreAuxLogits only
    rates = {block.relative_name: {conv.rate for conv in _convs(block)
                                   if conv.kernel_size != (1, 1)}
             for stage in net.blocks if isinstance(stage[1], layers.Sequential)
             for block in stage[1].layers}
    assert rates['block35_1'] == {(1, 1)} and rates['block17_20'] == {(2, 2)}
    assert {conv.stride for conv in _convs(dict(net.blocks)['Mixed_6a'])} == {(1, 1)}
    with pytest.raises(ValueError, match='output_stride must be 8 or 16'):
        InceptionResnetV2(10, output_stride=32)


def test_irv2_half_size_images_and_base():
    net = InceptionResnetV2(1000, weight_decay=0.0004)
    logits, end_points = net(_images(150, 150, batch=2))
    assert logits.shape == [2, 1000] and end_points['AuxLogits'].shape == [2, 1000]
    assert list(end_points) == IRV2_ENDPOINTS + ['AuxLogits', 'global_pool',
                                                'PreLogitsFlatten', 'Logits', 'Predictions']
    assert end_points['Conv2d_7b_1x1'].shape == [2, 3, 3, 1536]
    shapes = {v.name: v.shape.as_list() for v in net.variables}
    assert shapes['InceptionResnetV2/AuxLogits/Conv2d_2a_5x5/weights:0'] == [1, 1, 128, 768]
    assert shapes['InceptionResnetV2/AuxLogits/Logits/weights:0'] == [768, 1000]
    features, base_points = net.base(_images(150, 150, batch=2))
    assert list(base_points) == IRV2_ENDPOINTS
    np.testing.assert_allclose(features, end_points['Conv2d_7b_1x1'], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        net.base(_images(150, 150), 'Mixed_8a')
    # slim's arg scope decays weights and biases alike; biases: the 40 residual
    # up-convs and the two classifiers.
    decayed = [v for v in net.trainable_variables
               if v.name.endswith(('weights:0', 'biases:0'))]
    assert sum(v.name.endswith('biases:0') for v in decayed) == 10 + 20 + 9 + 1 + 2
    assert len(net.regularization_losses()) == len(decayed)


@pytest.mark.slow  # a full-size build; the half-size ones stay in make test
def test_irv2_pools_whole_map_and_works_without_classes():
    net = InceptionResnetV2(10, create_aux_logits=False)
    logits, end_points = net(_images(330, 400))
    assert end_points['Conv2d_7b_1x1'].shape == [1, 8, 11, 1536]
    assert logits.shape == [1, 10] and 'AuxLogits' not in end_points
    features, end_points = InceptionResnetV2(0)(_images(107, 107))
    assert features.shape == [1, 1, 1, 1536]
    assert 'Logits' not in end_points and 'AuxLogits' not in end_points


def _residual_block(activation, scale=0.17):
    def conv(name, depth, kernel, stride=1, padding='SAME', rate=1):
        return layers.Conv2D(name, depth, kernel, stride=stride, padding=padding, rate=rate,
                             normalizer=inception_blocks.BATCH_NORM)
    up = layers.Conv2D('Conv2d_1x1', 320, 1, activation=None,
                       biases_initializer=layers.constant_initializer(0.5))
    return inception_resnet_v2.ResidualBlock(
        'block35_1', inception_resnet_v2.BLOCK35, scale=scale, activation=activation,
        conv=conv, up=up)


@pytest.mark.parametrize('activation', [None, tf.nn.relu])
def test_residual_scales_the_branch_before_the_add_and_activates_after(activation):
    tf.random.set_seed(0)
    block = _residual_block(activation)
    inputs = _images(9, 9, channels=320)
    outputs = block(inputs, training=False)
    up = block.up(block.branches(inputs, training=False), training=False)
    expected = inputs + 0.17 * up
    np.testing.assert_allclose(outputs, activation(expected) if activation else expected,
                               rtol=1e-5, atol=1e-5)
    assert block.up.biases is not None and block.up.batch_norm is None


def test_residual_clips_the_scaled_branch_under_relu6():
    tf.random.set_seed(0)
    block = _residual_block(tf.nn.relu6, scale=100.0)  # a branch far beyond +-6
    inputs = _images(9, 9, channels=320)
    outputs = block(inputs, training=False)
    up = 100.0 * block.up(block.branches(inputs, training=False), training=False)
    assert tf.reduce_max(tf.abs(up)) > 6
    np.testing.assert_allclose(outputs, tf.nn.relu6(inputs + tf.clip_by_value(up, -6, 6)),
                               rtol=1e-5, atol=1e-5)


def test_irv2_activation_fn_acts_on_the_blocks_but_not_the_last_block8():
    net = InceptionResnetV2(10, activation_fn=tf.nn.relu6)
    blocks = [m for m in net._flatten(
        predicate=lambda m: isinstance(m, inception_resnet_v2.ResidualBlock))]
    assert len(blocks) == 10 + 20 + 9 + 1
    assert {b.relative_name: b.activation for b in blocks}['Block8'] is None
    assert {b.activation for b in blocks if b.relative_name != 'Block8'} == {tf.nn.relu6}
