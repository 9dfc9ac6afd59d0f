"""deployment.sync_replicas in one process: which offered gradients are averaged,
which wait, which are dropped, what a failed offer leaves, which worker a token
releases. The cluster runs (and kills) are in test_distributed_training.py."""
import threading

import numpy as np
import pytest
import tensorflow as tf

from deployment.sync_replicas import SyncReplicas


class _Setup:
    """Two variables trained by plain SGD (lr 1) through SyncReplicas(N), M workers."""

    def __init__(self, needed, workers=3, target=100):
        self.weights = [tf.Variable([1.0, 2.0]), tf.Variable([[3.0]])]
        self.global_step = tf.Variable(0, dtype=tf.int64)
        self.sync = SyncReplicas(self.weights, self.global_step, needed, workers)
        self.target = target

    def apply_mean(self, mean_gradients, version):
        del version
        for weight, gradient in zip(self.weights, mean_gradients):
            weight.assign_sub(gradient)

    def offer(self, worker, version, gradients):
        """Offers in a graph, as the step does (a taken offer does not wait here); the
        worker and version are inputs, as in the step, not constants."""
        offer = tf.function(lambda worker, version: self.sync.offer(
            worker, version, tf.constant(self.target, tf.int64),
            [tf.constant(g, tf.float32) for g in gradients], self.apply_mean))
        return offer(tf.constant(worker, tf.int64),
                     tf.constant(version, tf.int64)).numpy().decode()

    def tokens(self, worker):
        queue = self.sync.release_queues[worker]
        return list(queue.dequeue_many(queue.size()).numpy())


def _gradients(a, b):
    return [[a, a], [[b]]]


def test_the_nth_fresh_gradient_applies_the_mean_of_all_n():
    setup = _Setup(needed=3)
    assert setup.offer(0, 0, [[1.0, 1.0], [[3.0]]]) == 'waiting'
    assert setup.offer(2, 0, [[2.0, 0.0], [[0.0]]]) == 'waiting'
    assert setup.global_step.numpy() == 0  # nothing applied before the third
    np.testing.assert_allclose(setup.weights[0].numpy(), [1.0, 2.0])
    assert setup.offer(1, 0, [[3.0, 2.0], [[6.0]]]) == 'applied'
    assert setup.global_step.numpy() == 1
    np.testing.assert_allclose(setup.weights[0].numpy(), [1.0 - 2.0, 2.0 - 1.0])
    np.testing.assert_allclose(setup.weights[1].numpy(), [[3.0 - 3.0]])
    # One token of version 0 for each waiting worker, none for the one that applied.
    assert [setup.tokens(w) for w in range(3)] == [[0], [], [0]]
    assert setup.sync.count.numpy() == 0


def test_gradients_of_an_older_version_are_dropped_and_counted():
    setup = _Setup(needed=1)
    assert setup.offer(0, 0, _gradients(1.0, 1.0)) == 'applied'
    before = [w.numpy().copy() for w in setup.weights]
    # Two backups that computed at version 0 arrive after the update.
    assert setup.offer(1, 0, _gradients(5.0, 5.0)) == 'stale'
    assert setup.offer(2, 0, _gradients(7.0, 7.0)) == 'stale'
    assert setup.sync.dropped.numpy() == 2
    assert setup.global_step.numpy() == 1
    for weight, old in zip(setup.weights, before):
        np.testing.assert_array_equal(weight.numpy(), old)
    assert setup.offer(1, 1, _gradients(1.0, 1.0)) == 'applied'
    assert setup.global_step.numpy() == 2


def test_offers_after_the_round_target_change_nothing():
    setup = _Setup(needed=1, target=1)
    assert setup.offer(0, 0, _gradients(1.0, 1.0)) == 'applied'
    assert setup.offer(1, 1, _gradients(1.0, 1.0)) == 'done'
    assert (setup.global_step.numpy(), setup.sync.dropped.numpy()) == (1, 0)
    # A backup's gradient of the version before arrives late: stale, and counted.
    assert setup.offer(2, 0, _gradients(1.0, 1.0)) == 'stale'
    assert (setup.global_step.numpy(), setup.sync.dropped.numpy()) == (1, 1)


def test_a_worker_gives_at_most_one_gradient_to_a_round():
    """A restarted worker whose dead self's gradient is in the round offers again at
    the same version: dropped, so the update still has N different workers' gradients."""
    setup = _Setup(needed=2)
    assert setup.offer(1, 0, _gradients(2.0, 2.0)) == 'waiting'
    assert setup.offer(1, 0, _gradients(100.0, 100.0)) == 'duplicate'
    assert (setup.global_step.numpy(), setup.sync.dropped.numpy()) == (0, 1)
    assert setup.offer(0, 0, _gradients(4.0, 4.0)) == 'applied'
    np.testing.assert_allclose(setup.weights[0].numpy(), [1.0 - 3.0, 2.0 - 3.0])


def test_an_offer_that_fails_half_written_never_reaches_an_update():
    """The offer dies between its slot writes (the fault point raises, as a worker's
    death fails the rest of its function): its half-written slot is not counted, and
    the next offer overwrites it whole."""
    setup = _Setup(needed=2)

    def fail_worker_1(stage, worker, version, taken):
        del version, taken
        if stage != 'offer':
            return tf.constant(True)
        return tf.debugging.assert_none_equal(worker, tf.constant(1, tf.int64),
                                              message='worker 1 died')

    setup.sync.fault_point = fail_worker_1
    with pytest.raises(tf.errors.InvalidArgumentError, match='worker 1 died'):
        setup.offer(1, 0, _gradients(50.0, 50.0))
    # Worker 1's first half reached slot 0, uncounted; the lock was released.
    assert setup.sync.slots[0].numpy()[0].tolist() == [50.0, 50.0]
    assert setup.sync.slots[1].numpy()[0].tolist() == [[0.0]]
    assert (setup.sync.count.numpy(), setup.global_step.numpy()) == (0, 0)
    assert setup.offer(0, 0, _gradients(2.0, 2.0)) == 'waiting'
    assert setup.offer(2, 0, _gradients(4.0, 6.0)) == 'applied'
    np.testing.assert_allclose(setup.weights[0].numpy(), [1.0 - 3.0, 2.0 - 3.0])
    np.testing.assert_allclose(setup.weights[1].numpy(), [[3.0 - 4.0]])


def test_the_checkpointed_counters_count_updates_and_the_gradients_they_combined():
    """SyncReplicas.counters(): an update counts once and adds its N gradients; a
    duplicate, a stale gradient or a 'done' offer adds nothing."""
    setup = _Setup(needed=2, target=1)
    assert setup.offer(0, 0, _gradients(1.0, 1.0)) == 'waiting'
    assert setup.offer(0, 0, _gradients(1.0, 1.0)) == 'duplicate'
    assert setup.offer(1, 0, _gradients(1.0, 1.0)) == 'applied'
    assert setup.offer(2, 0, _gradients(1.0, 1.0)) == 'stale'
    assert setup.offer(2, 1, _gradients(1.0, 1.0)) == 'done'
    counters = {key: int(value.numpy()) for key, value in setup.sync.counters().items()}
    assert counters == {'updates_applied': 1, 'gradients_applied': 2}


def _wait_in_thread(setup, worker, version):
    """Starts worker's wait for the release of `version`; returns (thread, result)."""
    result = []
    wait = tf.function(lambda: setup.sync.wait_for_release(
        tf.constant(worker, tf.int64), tf.constant(version, tf.int64)))
    thread = threading.Thread(target=lambda: result.append(int(wait())), daemon=True)
    thread.start()
    return thread, result


def test_a_dead_waiters_token_releases_nobody_else():
    """Worker 1 died waiting for round 0: its token stays in its own queue. In round 1
    worker 0 is not released by it, and worker 1, restarted, discards it."""
    setup = _Setup(needed=2)
    setup.offer(1, 0, _gradients(1.0, 1.0))
    assert setup.offer(0, 0, _gradients(1.0, 1.0)) == 'applied'
    assert int(setup.sync.release_queues[1].size()) == 1  # nobody took it
    waiters = {w: _wait_in_thread(setup, w, 1) for w in (0, 1)}
    for thread, _ in waiters.values():
        thread.join(timeout=1.0)
    assert [thread.is_alive() for thread, _ in waiters.values()] == [True, True]
    assert int(setup.sync.release_queues[1].size()) == 0  # discarded as old
    for queue in setup.sync.release_queues[:2]:
        queue.enqueue(tf.constant(1, tf.int64))
    for thread, result in waiters.values():
        thread.join(timeout=30)
        assert result == [1]
    assert [int(q.size()) for q in setup.sync.release_queues] == [0, 0, 0]


def test_replicas_to_aggregate_must_be_positive():
    with pytest.raises(ValueError, match='at least 1'):
        SyncReplicas([tf.Variable(1.0)], tf.Variable(0, dtype=tf.int64), 0, 2)
