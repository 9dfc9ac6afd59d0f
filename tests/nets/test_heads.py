"""The pooling and the convolutional classification head several families share
(nets/heads.py)."""
import numpy as np
import tensorflow as tf

from nets import heads, layers


def _logits_conv():
    conv = layers.Conv2D('Logits/Conv2d_1c_1x1', 5, 1, activation=None)
    conv.resolve_scopes('Net')
    return conv


def _average(features):
    return 'global_pool', tf.reduce_mean(features, [1, 2], keepdims=True)


def test_conv_classifier_records_slims_end_points():
    features = tf.random.stateless_normal([3, 4, 4, 8], seed=[1, 2])
    end_points = {}
    logits = heads.conv_classifier(features, _logits_conv(), end_points, pool=_average,
                                   dropout_keep_prob=0.5, training=False, pre_logits=True)
    assert logits.shape == [3, 5]
    assert list(end_points) == ['global_pool', 'PreLogits', 'Logits', 'Predictions']
    np.testing.assert_array_equal(end_points['PreLogits'], end_points['global_pool'])
    np.testing.assert_allclose(end_points['Predictions'], tf.nn.softmax(logits))
    kept = heads.conv_classifier(features, _logits_conv(), {}, pool=_average,
                                 dropout_keep_prob=0.5, training=False,
                                 spatial_squeeze=False)
    assert kept.shape == [3, 1, 1, 5]


def test_conv_classifier_without_logits_returns_the_pooled_features():
    features = tf.ones([2, 3, 3, 4])
    end_points = {}
    pooled = heads.conv_classifier(features, None, end_points, pool=_average,
                                   dropout_keep_prob=0.5, training=True)
    assert pooled.shape == [2, 1, 1, 4] and list(end_points) == ['global_pool']


def test_conv_classifier_ops_are_under_logits_as_slims():
    names = {}
    conv = _logits_conv()

    @tf.function
    def classify(features):
        end_points = {}
        names['logits'] = heads.conv_classifier(
            features, conv, end_points, pool=_average, dropout_keep_prob=0.5,
            training=False).name
        names['pool'] = end_points['global_pool'].name
        return end_points['Logits']

    classify.get_concrete_function(tf.TensorSpec([1, 4, 4, 8]))
    assert names['pool'].startswith('Logits/') and names['logits'].startswith(
        'Logits/SpatialSqueeze')


def test_conv_classifier_drops_out_from_the_generator_in_training():
    features = tf.ones([16, 1, 1, 8])
    conv = _logits_conv()

    def logits(seed):
        return heads.conv_classifier(
            features, conv, {}, pool=lambda net: (None, net), dropout_keep_prob=0.5,
            training=True, random_generator=tf.random.Generator.from_seed(seed)).numpy()

    np.testing.assert_array_equal(logits(1), logits(1))
    assert not np.allclose(logits(1), logits(2))


def test_reduced_kernel_size_caps_the_kernel_by_a_known_map():
    assert heads.reduced_kernel_size(tf.zeros([1, 5, 9, 2]), [7, 7]) == [5, 7]
    spec = tf.TensorSpec([1, None, None, 2])
    kernel = {}
    tf.function(lambda x: kernel.setdefault(
        'k', heads.reduced_kernel_size(x, [7, 7])) and x).get_concrete_function(spec)
    assert kernel['k'] == [7, 7]
