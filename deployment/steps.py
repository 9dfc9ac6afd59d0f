"""The inner loop of training: `train_n_steps(n)` runs n steps in one compiled call.

A step is split in three: compute gradients (the model step's `replica_gradients`) ->
aggregate them (this plan's aggregator: all-reduce, or nothing for asynchronous
parameter servers) -> apply (the model step's `apply_gradients`, no cross-replica
communication). Where the call runs is the runner's business (in this process, or
scheduled on parameter-server workers). Sync replicas have their own inner loop
(deployment.sync_replicas_steps); the deployment plan chooses one, once.

The model step is any object with `global_step`, `train_variables`,
`replica_gradients(images, labels, step, *, capture, factor_weights) -> (gradients,
metrics, first_images)`, `apply_gradients(grads_and_vars, learning_rate, *, capture)`,
`share_replica_statistics()`, `after_update()` and `summary_capture`
(training.summaries.capture.SummaryCapture) (training.loop.model_step.ModelStep). Its
modes are arguments of each step: `capture` (TensorBoard's capture in the step: a
separately traced variant) and `factor_weights` (matmul weights' gradients as factors,
decided by the plan once).
"""
import functools

import dataclasses
from typing import Dict

import numpy as np
import tensorflow as tf


@dataclasses.dataclass
class StepResult:
    """What a call of the inner loop returns: its last step's metrics, reduced over
    replicas (floats), and the first images of that step's batch (for summaries)."""
    metrics: Dict[str, float]
    images: np.ndarray


class ReplicaSteps:
    """Steps in which every replica's gradients are aggregated by `aggregator` and
    applied at once: one device, clones, multi-worker all-reduce, async parameter
    servers (where the aggregator leaves each worker's gradients as they are)."""

    def __init__(self, strategy: tf.distribute.Strategy, model_step, runner, aggregator,
                 jit_compile: bool = False, capture_in_every_step: bool = False,
                 factor_weights: bool = False):
        self.strategy = strategy
        self.factor_weights = factor_weights
        # Workers of a multi-worker all-reduce must run one function (their collectives
        # are matched by trace) whether or not the chief captures.
        self.capture_in_every_step = capture_in_every_step
        self.model_step = model_step
        self.runner = runner
        self.aggregator = aggregator
        # XLA compiles the replica's work (the iterator cannot be compiled). One
        # function per variant (with or without TensorBoard's capture), each traced
        # when first needed.
        self._replica_step_fns = {
            capture: (tf.function(functools.partial(self._replica_step, capture=capture),
                                  autograph=False, jit_compile=True)
                      if jit_compile else functools.partial(self._replica_step,
                                                            capture=capture))
            for capture in (False, True)}
        # Traced without AutoGraph (the loop is an explicit tf.while_loop): AutoGraph
        # converting every layer made tracing ~6x slower.
        self._steps_fns = {
            capture: tf.function(self._steps_with(capture), autograph=False)
            for capture in (False, True)}
        self._metric_names = None  # the step's metrics, in output order (set when traced)

    def _replica_step(self, images, labels, capture):
        model = self.model_step
        gradients, metrics, first_images = model.replica_gradients(
            images, labels, model.global_step, capture=capture,
            factor_weights=self.factor_weights)
        model.apply_gradients(
            self.aggregator.aggregate(zip(gradients, model.train_variables)),
            metrics['learning_rate'], capture=capture)
        model.share_replica_statistics()
        return metrics, first_images

    def _step(self, iterator, capture):
        # An optional third item: examples the input pipeline could not decode so far.
        images, labels, *skipped = next(iterator)
        metrics, first_images = self.strategy.run(self._replica_step_fns[capture],
                                                  args=(images, labels))
        self.model_step.after_update()
        self.model_step.global_step.assign_add(1)
        return self._stack_outputs(metrics, first_images, skipped)

    def _stack_outputs(self, metrics, first_images, skipped):
        """(metrics [replicas, names] float32, first images, skipped [pipelines]): fixed
        shapes a tf.while_loop can carry, not reduced across replicas (done once per call)."""
        local = self.strategy.experimental_local_results
        self._metric_names = list(metrics)
        values = tf.stack([tf.stack([tf.cast(m[name], tf.float32)
                                     for name in self._metric_names])
                           for m in local(metrics)])
        images = tf.cast(local(first_images)[0], tf.float32)
        skipped = (tf.stack(local(skipped[0])) if skipped else tf.zeros([1], tf.int64))
        return values, images, skipped

    def _steps_with(self, capture: bool):
        # A function of (iterator, num_steps) only: the parameter-server coordinator
        # rebinds the function's inputs by its signature.
        return lambda iterator, num_steps: self._steps(iterator, num_steps, capture)

    def _steps(self, iterator, num_steps, capture):
        """num_steps steps in one graph (the step traced once, inside the loop); returns
        the last step's metrics (averaged over replicas), first images, and the count of
        unreadable examples skipped so far. With `capture`, the step holds TensorBoard's
        capture (training.summaries.capture)."""
        def body(count, *_):
            return (count + 1, *self._step(iterator, capture))

        initial = (tf.constant(0), tf.zeros([0, 0]), tf.zeros([0, 0, 0, 0]),
                   tf.zeros([0], tf.int64))
        invariants = (tf.TensorShape([]), tf.TensorShape([None, None]),
                      tf.TensorShape([None] * 4), tf.TensorShape([None]))
        _, values, images, skipped = tf.while_loop(
            lambda count, *_: count < num_steps, body, initial,
            shape_invariants=invariants)
        return tf.reduce_mean(values, axis=0), images, tf.reduce_max(skipped)

    def train_n_steps(self, num_steps: int) -> StepResult:
        capture = self.capture_in_every_step or self.model_step.summary_capture.armed
        steps_fn = self._steps_fns[capture]
        values, images, skipped = self.runner.fetch(self.runner.run(steps_fn, num_steps))
        metrics = dict(zip(self._metric_names, values.tolist()))
        metrics['input/skipped_examples'] = float(skipped)
        return StepResult(metrics, images)
