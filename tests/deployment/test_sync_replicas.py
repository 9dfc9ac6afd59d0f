"""deployment.sync_replicas in one process: which offered gradients are averaged,
which wait, which are dropped. The cluster runs are in test_distributed_training.py."""
import numpy as np
import pytest
import tensorflow as tf

from deployment.sync_replicas import SyncReplicas


class _Setup:
    """Two variables trained by plain SGD (lr 1) through SyncReplicas(N)."""

    def __init__(self, needed):
        self.weights = [tf.Variable([1.0, 2.0]), tf.Variable([[3.0]])]
        self.global_step = tf.Variable(0, dtype=tf.int64)
        self.sync = SyncReplicas(self.weights, self.global_step, needed)
        self.sync.target.assign(100)
        self.applied = []

    def apply_mean(self, mean_gradients):
        for weight, gradient in zip(self.weights, mean_gradients):
            weight.assign_sub(gradient)

    def offer(self, version, gradients, wait=False):
        """Offers in a graph (as the step does); a 'waiting' offer blocks until a
        release, so with wait=False the test pre-loads one release token."""
        if wait:
            self.sync._releases.enqueue(tf.constant(-1, tf.int64))
        offer = tf.function(lambda: self.sync.offer(
            tf.constant(version, tf.int64), [tf.constant(g, tf.float32) for g in gradients],
            self.apply_mean))
        return offer().numpy().decode()


def test_the_nth_fresh_gradient_applies_the_mean_of_all_n():
    setup = _Setup(needed=3)
    assert setup.offer(0, [[1.0, 1.0], [[3.0]]], wait=True) == 'waiting'
    assert setup.offer(0, [[2.0, 0.0], [[0.0]]], wait=True) == 'waiting'
    assert setup.global_step.numpy() == 0  # nothing applied before the third
    np.testing.assert_allclose(setup.weights[0].numpy(), [1.0, 2.0])
    assert setup.offer(0, [[3.0, 2.0], [[6.0]]]) == 'applied'
    assert setup.global_step.numpy() == 1
    np.testing.assert_allclose(setup.weights[0].numpy(), [1.0 - 2.0, 2.0 - 1.0])
    np.testing.assert_allclose(setup.weights[1].numpy(), [[3.0 - 3.0]])
    # The two waiting workers' releases were queued; accumulators start again at zero.
    assert int(setup.sync._releases.size()) == 2
    assert [a.numpy().sum() for a in setup.sync.accumulators] == [0.0, 0.0]
    assert setup.sync.count.numpy() == 0


def test_gradients_of_an_older_version_are_dropped_and_counted():
    setup = _Setup(needed=1)
    assert setup.offer(0, [[1.0, 1.0], [[1.0]]]) == 'applied'
    before = [w.numpy().copy() for w in setup.weights]
    # Two backups that computed at version 0 arrive after the update.
    assert setup.offer(0, [[5.0, 5.0], [[5.0]]]) == 'stale'
    assert setup.offer(0, [[7.0, 7.0], [[7.0]]]) == 'stale'
    assert setup.sync.dropped.numpy() == 2
    assert setup.global_step.numpy() == 1
    for weight, old in zip(setup.weights, before):
        np.testing.assert_array_equal(weight.numpy(), old)
    assert setup.offer(1, [[1.0, 1.0], [[1.0]]]) == 'applied'
    assert setup.global_step.numpy() == 2


def test_offers_after_the_round_target_change_nothing():
    setup = _Setup(needed=1)
    setup.sync.target.assign(1)
    assert setup.offer(0, [[1.0, 1.0], [[1.0]]]) == 'applied'
    assert setup.offer(1, [[1.0, 1.0], [[1.0]]]) == 'done'
    assert (setup.global_step.numpy(), setup.sync.dropped.numpy()) == (1, 0)


def test_replicas_to_aggregate_must_be_positive():
    with pytest.raises(ValueError, match='at least 1'):
        SyncReplicas([tf.Variable(1.0)], tf.Variable(0, dtype=tf.int64), 0)
