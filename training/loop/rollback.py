"""--divergence_retries: a call of the inner loop that diverged (its loss non-finite or
above --loss_upper_bound, or the weights it leaves non-finite) is rolled back to the
last good checkpoint and run again on the batches that follow, instead of stopping
training.

What a rollback restores: every checkpointed object but the input position (weights,
optimizer slots, global step, moving averages, loss scale, dropout's generator), so the
input reads on past the batches that diverged. The rolled-back call never reaches the
controller's actions: no log line, summary or checkpoint of diverged weights.

"In a row": rollbacks with no checkpoint saved at or past the latest step that diverged
in between (the rerun of the diverged call reaching its step is past the trouble); such
a save restarts the count. After --divergence_retries of them, or with no checkpoint to
go back to, training stops with the one line of a diverged run.

Modes: one device and clones restore in this process. Multi-worker all-reduce: the
workers agree after each call whether any of them diverged (one small all-reduce), so
all roll back at the same call to the same checkpoint of their shared --train_dir.
Asynchronous parameter servers: the chief checks and restores after the call's closures
have all run (the runner's fetch joins the coordinator); each worker's iterator reads
on. Sync replicas: not offered, --divergence_retries acts as 0 (a logged line): the ps
tasks' gradient accumulators and tokens would not follow the restored step.
"""
import os
from typing import Callable, Optional, Sequence

import tensorflow as tf
from absl import logging

from core.errors import TrainingDiverged, tensorflow_reason
from deployment import runners
from training.checkpoints import integrity
from training.loop import actions as actions_lib


class DivergenceRollback:
    """`train_n_steps(n)` (the inner loop's) with diverged calls rolled back and run
    again, up to `retries` rollbacks in a row.

    A call diverged when its last step's loss did, or when the weights it leaves are
    not finite (a step's loss is taken before its update: a NaN batch whose loss a ReLU
    kept finite, or an exploding gradient, shows in the weights first), so a checkpoint
    is never saved of diverged weights.

    last_good() names the checkpoint to roll back to (None: none saved); restore(path)
    restores it without the input position; current_step() reads the global step;
    weights_finite() checks the trainable weights; any_worker(diverged) is True on every
    worker when any of them diverged.
    """

    def __init__(self, train_n_steps: Callable, *, retries: int, upper_bound: float,
                 last_good: Callable[[], Optional[str]], restore: Callable[[str], None],
                 current_step: Callable[[], int],
                 weights_finite: Callable[[], bool] = lambda: True,
                 any_worker: Callable[[bool], bool] = lambda diverged: diverged):
        self.train_n_steps = train_n_steps
        self.retries = retries
        self.upper_bound = upper_bound
        self.last_good = last_good
        self.restore = restore
        self.current_step = current_step
        self.weights_finite = weights_finite
        self.any_worker = any_worker
        self.in_a_row = 0
        self.latest_diverged = None  # the highest step that diverged in this row
        self.rollbacks = 0  # over the run, for the record

    def __call__(self, num_steps: int):
        while True:
            result = self.train_n_steps(num_steps)
            what = self._what_diverged(result.metrics['total_loss'])
            if not self.any_worker(what is not None):
                return result
            # The same call length again, from the restored step: on every worker alike.
            self._roll_back(what or 'Loss became non-finite or too large on another worker',
                            self.current_step())

    def _what_diverged(self, loss: float) -> Optional[str]:
        if actions_lib.diverged(loss, self.upper_bound):
            return actions_lib.describe_divergence(loss, self.upper_bound)
        if not self.weights_finite():
            return f'Weights became non-finite (the loss was {loss:g})'
        return None

    def _roll_back(self, what: str, step: int):
        last_good = self.last_good()
        good_step = integrity.step_of(last_good) if last_good else None
        if self.in_a_row and good_step is not None and good_step >= self.latest_diverged:
            self.in_a_row = 0  # saved at or past every divergence of the row: a new row
        self.latest_diverged = step if not self.in_a_row else max(self.latest_diverged, step)
        if last_good is None or self.in_a_row >= self.retries:
            after = (f' after {self.in_a_row} rollback(s) in a row (--divergence_retries='
                     f'{self.retries})' if self.in_a_row else '')
            raise actions_lib.divergence_error(what, step, last_good, after)
        self.restore(last_good)
        self.in_a_row += 1
        self.rollbacks += 1
        logging.warning('%s at step %d: rolled back to %s (rollback %d of %d); reading on '
                        'past the batches since.', what, step, os.path.basename(last_good),
                        self.in_a_row, self.retries)


def restorer(checkpoint: tf.train.Checkpoint) -> Callable[[str], None]:
    """restore(path) into `checkpoint` (the Trainer's objects without the input
    position); a checkpoint that cannot be read stops training in one line."""
    def restore(path: str):
        try:
            checkpoint.restore(path).expect_partial().assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.OpError) as error:
            raise TrainingDiverged(
                f'Training diverged and rolling back to {path} failed '
                f'({tensorflow_reason(error)}); lower --learning_rate (or check the input '
                'data) and train again from the last good checkpoint.') from None
    return restore


def weights_finite_of(variables: Sequence[tf.Variable]) -> Callable[[], bool]:
    """weights_finite(): one pass over the variables (this worker's copies)."""
    @tf.function(autograph=False)
    def all_finite():
        return tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in variables])

    return lambda: bool(all_finite().numpy())


def for_plan(plan, config, train_n_steps: Callable, checkpoint: tf.train.Checkpoint,
             current_step: Callable[[], int],
             variables: Sequence[tf.Variable]) -> Optional[DivergenceRollback]:
    """The Trainer's inner loop with rollbacks, or None where there are none (the
    controller's divergence check stops at once): --divergence_retries=0, or sync
    replicas, where it acts as 0 (logged once)."""
    if not config.divergence_retries:
        return None
    if plan.replicas_to_aggregate is not None:
        logging.info('--divergence_retries=%d acts as 0 under sync replicas (a restored step '
                     'would not reset the gradient accumulators and tokens the ps tasks '
                     'hold): a diverged loss stops training.', config.divergence_retries)
        return None
    train_dir = config.train_dir
    return DivergenceRollback(
        train_n_steps, retries=config.divergence_retries,
        upper_bound=config.loss_upper_bound,
        # Read afresh: on a worker other than the chief the state file is the chief's.
        last_good=lambda: tf.train.latest_checkpoint(train_dir),
        restore=restorer(checkpoint), current_step=current_step,
        weights_finite=weights_finite_of(variables),
        any_worker=(any_worker_of(plan.strategy) if plan.agreement is not None
                    else lambda diverged: diverged))


def any_worker_of(strategy: tf.distribute.Strategy) -> Callable[[bool], bool]:
    """any_worker(diverged) for multi-worker all-reduce: one small all-reduce, which
    every worker runs after every call (so the collectives pair); a worker that stops
    answering ends training in one line, as in the step."""
    def replica_sum(value):
        # A copy made on the replica's device: the all-reduce places by it.
        return tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, tf.identity(value))

    @tf.function(autograph=False)
    def any_of(value):
        return strategy.experimental_local_results(
            strategy.run(replica_sum, args=(value,)))[0]

    cluster = strategy.cluster_resolver.cluster_spec().as_dict()

    def any_worker(diverged: bool) -> bool:
        with runners.task_failures_named(cluster, runners.RESTART_ALL_WORKERS):
            return bool(any_of(tf.constant(float(diverged))).numpy() > 0)

    return any_worker
