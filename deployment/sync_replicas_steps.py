"""The inner loop of sync replicas: each worker's steps offer their gradients to
deployment.sync_replicas, which applies the mean of every --replicas_to_aggregate
gradients of one version and drops the others.

A call (`train_n_steps(n)`) is a round: its target is global_step + n. The chief
(deployment.sync_replicas_runner: `SyncRounds` in `SyncReplicasRunner`) keeps one closure per worker in
flight, each stepping until global_step reaches its own round's target, and returns
as soon as one closure of this round has ended, i.e. once the round's last update is
applied. Like TF1's chief it never waits for a backup's step still running: that
closure ends at its next check (its offer is stale, or 'done') and is replaced then.
"""
import functools

import tensorflow as tf
from absl import logging

from deployment import aggregation
from deployment.steps import StepResult
from deployment.sync_replicas import SyncReplicas


class SyncReplicaSteps:
    """Steps of a sync-replicas worker; the model step is as for deployment.steps."""

    def __init__(self, strategy: tf.distribute.Strategy, model_step, runner_factory,
                 replicas_to_aggregate: int):
        self.strategy = strategy
        self.model_step = model_step
        # No public API names the worker count (strategy.cluster_resolver is None).
        num_workers = strategy.extended._num_workers  # pylint: disable=protected-access
        with strategy.scope():
            self.sync_replicas = SyncReplicas(model_step.train_variables,
                                              model_step.global_step, replicas_to_aggregate,
                                              num_workers)
        self.runner = runner_factory(self.sync_replicas)
        # Within a worker, clones first agree on one gradient (a no-op for one clone).
        self.aggregator = aggregation.AllReduce()
        # With and without TensorBoard's capture, each traced when first needed.
        self._steps_fns = {capture: tf.function(self._steps_with(capture))
                           for capture in (False, True)}
        self._dropped_logged = 0

    def checkpointed(self) -> dict:
        """State of these steps that checkpoints hold, by key: the update counters."""
        return {'sync_replicas': self.sync_replicas.counters()}

    def _contribution(self, images, labels, version, capture):
        # Weights are read after the version they belong to (see deployment.sync_replicas).
        with tf.control_dependencies([version]):
            gradients, metrics, first_images = self.model_step.replica_gradients(
                images, labels, version, capture=capture)
        summed = self.aggregator.aggregate(zip(gradients, self.model_step.train_variables))
        return [g for g, _ in summed], metrics, first_images

    def _apply_mean(self, mean_gradients, version, capture):
        """The update, on the parameter servers (its learning rate is the version's)."""
        model = self.model_step
        model.apply_gradients(zip(mean_gradients, model.train_variables),
                              model.learning_rate_fn(version), capture=capture)
        model.after_update()

    def _step(self, iterator, worker, target, capture):
        model, local, sync = self.model_step, self.strategy.experimental_local_results, \
            self.sync_replicas
        images, labels, *skipped = next(iterator)
        version = model.global_step.read_value()
        gradients, metrics, first_images = self.strategy.run(
            self._contribution, args=(images, labels, version, capture))
        outcome = sync.offer(worker, version, target, local(gradients)[0],
                             functools.partial(self._apply_mean, capture=capture))
        released = tf.cond(tf.equal(outcome, 'waiting'),
                           lambda: sync.wait_for_release(worker, version),
                           lambda: tf.identity(version))
        mean = tf.distribute.ReduceOp.MEAN
        with tf.control_dependencies([released]):  # the step ends after its wait
            metrics = {k: self.strategy.reduce(mean, v, axis=None)
                       for k, v in metrics.items()}
        if skipped:  # counted per input pipeline: this worker's
            metrics['input/skipped_examples'] = tf.reduce_max(tf.stack(local(skipped[0])))
        return metrics, local(first_images)[0]

    def _steps_with(self, capture: bool):
        # A function of (iterator, target) only: the coordinator rebinds the function's
        # inputs by its signature.
        return lambda iterator, target: self._steps(iterator, target, capture)

    def _steps(self, iterator, target, capture):
        """Steps until global_step reaches `target`, the round's. With `capture`, the
        step holds TensorBoard's capture."""
        # The worker running this closure (a call-time value: the function is traced once).
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        outputs = self._step(iterator, worker, target, capture)
        return tf.while_loop(
            lambda _: self.model_step.global_step < target,
            lambda _: (self._step(iterator, worker, target, capture),), (outputs,))[0]

    def train_n_steps(self, num_steps: int) -> StepResult:
        steps_fn = self._steps_fns[self.model_step.summary_capture.armed]
        metrics, images = self.runner.fetch(self.runner.run(steps_fn, num_steps))
        metrics = {k: float(v) for k, v in metrics.items()}
        # Read once per call, on the chief: the step itself never reads it.
        dropped = int(self.sync_replicas.dropped.numpy())
        if dropped > self._dropped_logged:
            logging.info('Sync replicas: %d stale gradient(s) dropped so far.', dropped)
            self._dropped_logged = dropped
        metrics['sync_replicas/stale_gradients_dropped'] = float(dropped)
        return StepResult(metrics, images)
