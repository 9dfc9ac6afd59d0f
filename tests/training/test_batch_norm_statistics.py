"""Recomputed batch-norm statistics equal a numpy average of the batch moments, on one
device and over two clones; the immature-statistics warning says when and what to do."""
import numpy as np
import pytest
import tensorflow as tf

from nets import layers
from training.evaluation import batch_norm_statistics

RECOMPUTE = layers.BatchNormParams(decay=0.0, epsilon=0.001, center=True, scale=True)


class TwoLayers(layers.Module):
    """Two 1x1 convs with batch norm and ReLU: numpy can follow them exactly."""

    def __init__(self, batch_norm=RECOMPUTE):
        super().__init__('net')
        self.first = layers.Conv2D('first', 4, 1, normalizer=batch_norm)
        self.second = layers.Conv2D('second', 3, 1, normalizer=batch_norm)

    def forward(self, images, *, training):
        return self.second(self.first(images, training=training), training=training)


def _numpy_statistics(net, batches):
    """Per layer: (mean of the batch means, mean of the Bessel-corrected batch variances),
    the layers normalising with each batch's own moments, as in training."""
    per_layer = [([], []), ([], [])]
    for images in batches:
        x = images.reshape(-1, images.shape[-1]).astype(np.float64)
        for layer, (means, variances) in zip((net.first, net.second), per_layer):
            h = x @ layer.weights.numpy().reshape(x.shape[1], -1)
            mean, biased = h.mean(0), h.var(0)
            means.append(mean)
            variances.append(biased * len(h) / (len(h) - 1))
            bn = layer.batch_norm
            x = np.maximum((h - mean) / np.sqrt(biased + bn.params.epsilon)
                           * bn.gamma.numpy() + bn.beta.numpy(), 0)
    return [(np.mean(m, 0), np.mean(v, 0)) for m, v in per_layer]


def _batches(count, batch=8, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(1.0, 2.0, (batch, 5, 5, 3)).astype(np.float32) for _ in range(count)]


def _dataset(batches):
    images = np.concatenate(batches)
    labels = np.zeros(len(images), np.int64)
    return tf.data.Dataset.from_tensor_slices((images, labels)).batch(len(batches[0]))


def _trained_looking(net):
    net(tf.zeros([1, 5, 5, 3]), training=False)
    rng = np.random.default_rng(1)
    for bn in batch_norm_statistics.batch_norms(net):
        bn.gamma.assign(rng.uniform(0.5, 1.5, bn.gamma.shape))
        bn.beta.assign(rng.normal(0, 0.3, bn.beta.shape))


def test_recomputed_statistics_are_the_average_of_the_batch_moments():
    net = TwoLayers()
    _trained_looking(net)
    batches = _batches(5)
    result = batch_norm_statistics.recompute(net, _dataset(batches), 4,
                                             tf.distribute.get_strategy())
    assert (result.num_batches, result.num_layers) == (4, 2)
    expected = _numpy_statistics(net, batches[:4])
    for layer, (mean, variance) in zip((net.first, net.second), expected):
        np.testing.assert_allclose(layer.batch_norm.moving_mean.numpy(), mean,
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(layer.batch_norm.moving_variance.numpy(), variance,
                                   rtol=1e-4, atol=1e-5)


def test_two_clones_average_every_replica_batch():
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
    with strategy.scope():
        net = TwoLayers()
        _trained_looking(net)
    batches = _batches(6, batch=8)
    # Each global batch of 8 is split in two per-replica batches of 4.
    batch_norm_statistics.recompute(net, _dataset(batches), 3, strategy)
    halves = [half for images in batches[:3] for half in np.split(images, 2)]
    for layer, (mean, variance) in zip((net.first, net.second),
                                       _numpy_statistics(net, halves)):
        for replica in strategy.experimental_local_results(layer.batch_norm.moving_mean):
            np.testing.assert_allclose(replica.numpy(), mean, rtol=1e-4, atol=1e-5)
        for replica in strategy.experimental_local_results(
                layer.batch_norm.moving_variance):
            np.testing.assert_allclose(replica.numpy(), variance, rtol=1e-4, atol=1e-5)


def test_a_network_with_moving_decay_is_refused():
    net = TwoLayers(layers.BatchNormParams(decay=0.9, scale=True))
    _trained_looking(net)
    with pytest.raises(ValueError, match='batch_norm_decay=0'):
        batch_norm_statistics.recompute(net, _dataset(_batches(1)), 1,
                                        tf.distribute.get_strategy())


def test_the_warning_names_the_fix_when_the_initial_value_still_weighs():
    slim = layers.BatchNormParams(decay=0.9997)
    warning = batch_norm_statistics.immature_warning(slim, 400)
    assert '89%' in warning and '--recompute_batch_norm_statistics' in warning
    assert '--batch_norm_decay' in warning
    assert batch_norm_statistics.immature_warning(slim, 20000) is None
    assert batch_norm_statistics.immature_warning(layers.BatchNormParams(decay=0.99),
                                                  400) is None
    assert batch_norm_statistics.immature_warning(None, 10) is None
    assert batch_norm_statistics.steps_to_mature(0.99) == 299
