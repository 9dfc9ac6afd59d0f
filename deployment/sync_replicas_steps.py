"""The inner loop of sync replicas: each worker's steps offer their gradients to
deployment.sync_replicas, which applies the mean of every --replicas_to_aggregate
gradients of one version and drops stale ones.

A call (`train_n_steps(n)`) is a round: the runner sets the round's target update and
schedules one closure per worker, each stepping until global_step reaches it.
"""
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
        with strategy.scope():
            self.sync_replicas = SyncReplicas(model_step.train_variables,
                                              model_step.global_step, replicas_to_aggregate)
        self.runner = runner_factory(self.sync_replicas)
        # Within a worker, clones first agree on one gradient (a no-op for one clone).
        self.aggregator = aggregation.AllReduce()
        # With and without TensorBoard's capture, each traced when first needed.
        self._steps_fns = {capture: tf.function(self._steps_with(capture))
                           for capture in (False, True)}
        self._dropped_logged = 0

    def _contribution(self, images, labels, version):
        # Weights are read after the version they belong to (see deployment.sync_replicas).
        with tf.control_dependencies([version]):
            gradients, metrics, first_images = self.model_step.replica_gradients(
                images, labels, version)
        summed = self.aggregator.aggregate(zip(gradients, self.model_step.train_variables))
        return [g for g, _ in summed], metrics, first_images

    def _step(self, iterator):
        model, local = self.model_step, self.strategy.experimental_local_results
        images, labels, *skipped = next(iterator)
        version = model.global_step.read_value()
        gradients, metrics, first_images = self.strategy.run(
            self._contribution, args=(images, labels, version))

        def apply_mean(mean_gradients):
            model.apply_gradients(zip(mean_gradients, model.train_variables),
                                  local(metrics['learning_rate'])[0])
            model.after_update()

        self.sync_replicas.offer(version, local(gradients)[0], apply_mean)
        mean = tf.distribute.ReduceOp.MEAN
        metrics = {k: self.strategy.reduce(mean, v, axis=None) for k, v in metrics.items()}
        if skipped:  # counted per input pipeline: this worker's
            metrics['input/skipped_examples'] = tf.reduce_max(tf.stack(local(skipped[0])))
        return metrics, local(first_images)[0]

    def _steps_with(self, capture: bool):
        # A function of (iterator, num_steps) only: the coordinator rebinds the
        # function's inputs by its signature.
        return lambda iterator, num_steps: self._steps(iterator, num_steps, capture)

    def _steps(self, iterator, num_steps, capture):
        """Steps until the round's target update (the runner sets it); num_steps unused.
        With `capture`, the step holds TensorBoard's capture."""
        del num_steps
        with self.model_step.summary_capture.tracing(capture):
            outputs = self._step(iterator)
            return tf.while_loop(
                lambda _: self.model_step.global_step < self.sync_replicas.target,
                lambda _: (self._step(iterator),), (outputs,))[0]

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
