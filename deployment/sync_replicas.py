"""Synchronous replicas over parameter servers, with backup workers, on TF2.

TF-Slim's `--sync_replicas --replicas_to_aggregate=N` (TF1's SyncReplicasOptimizer)
made every update the mean of N workers' gradients; with N below the number of workers
M, the M - N slowest are backups whose late gradients are dropped, so one straggler
does not stall every step. TF2's ParameterServerStrategy is asynchronous only; this
module brings the synchronous mode back with TF2 primitives, everything on the
parameter servers, no home-made transport:

- `version`: the Trainer's global_step; it counts applied updates. A worker reads it
  before it reads the weights (a control dependency), so its gradient belongs to that
  version or is stale.
- Per trainable variable, an accumulator variable beside it on its ps task; a count and
  a drop counter; a `tf.CriticalSection` on ps task 0 serialising every offer.
- `offer(version, gradients, apply_mean)`, in the worker's step: inside the critical
  section, a gradient of the current version (and below the round's target) is added
  and counted; the Nth one applies the mean (`apply_mean`: optimizer, moving averages),
  then, once every weight holds it, increments global_step, zeroes the accumulators
  and releases the N - 1 waiting workers (tokens in a FIFO queue on ps task 0). Any other gradient is stale: dropped and
  counted. A worker whose gradient was taken waits for its release before its next
  step, as slim's sync token queue made it, so with N = M each update averages one
  gradient from every worker.

Guarantees: every applied update is the mean of exactly N gradients, all computed
from the weights of one version, and global_step counts these updates. A worker
never blocks on a slower one unless its own gradient is waiting for the Nth, so with
N < M training runs at the pace of the fastest N; with N = M it needs every worker
(a dead worker stalls it until it is back, as in slim). Weights are read without the
lock, so a worker that reads during an update gets a torn copy, but the version it
read first has moved on by then, so that gradient is dropped, never applied. Batch
norm's moving statistics are updated by every step, as slim's workers did.
Accumulators are not checkpointed: a resumed run starts a fresh round.
"""
from typing import Callable, Sequence

import tensorflow as tf

# A release token per waiting worker fits; far more than any cluster has workers.
_QUEUE_CAPACITY = 1 << 16


class SyncReplicas:
    """The accumulators and counters of sync replicas; create under strategy.scope()."""

    def __init__(self, variables: Sequence[tf.Variable], global_step: tf.Variable,
                 replicas_to_aggregate: int):
        if replicas_to_aggregate < 1:
            raise ValueError(f'replicas_to_aggregate must be at least 1, got '
                             f'{replicas_to_aggregate}.')
        self.replicas_to_aggregate = replicas_to_aggregate
        self.global_step = global_step
        self.variables = list(variables)
        strategy = tf.distribute.get_strategy()
        self.accumulators = []
        for variable in variables:
            with strategy.extended.colocate_vars_with(variable):
                self.accumulators.append(tf.Variable(
                    tf.zeros(variable.shape, variable.dtype), trainable=False,
                    name=variable.name.split(':')[0].replace('/', '_') + '_accumulator'))

        def counter(name):
            return tf.Variable(0, dtype=tf.int64, trainable=False, name=name)

        self.count = counter('sync_replicas_count')
        # Fresh gradients are taken while global_step < target; the runner sets it.
        self.target = counter('sync_replicas_target')
        self.dropped = counter('sync_replicas_stale_gradients_dropped')
        with tf.device(self.count.device):
            self._lock = tf.CriticalSection(name='sync_replicas')
            self._releases = tf.queue.FIFOQueue(_QUEUE_CAPACITY, [tf.int64], shapes=[[]],
                                                name='sync_replicas_releases')

    def offer(self, version: tf.Tensor, gradients: Sequence[tf.Tensor],
              apply_mean: Callable[[Sequence[tf.Tensor]], None]) -> tf.Tensor:
        """Offers gradients computed at `version`; returns 'applied', 'waiting' (taken,
        then released after the update), 'stale' (dropped) or 'done' (round over).

        `version` is global_step read before the weights; apply_mean(mean_gradients)
        applies the update (optimizer, moving averages); global_step is moved here.
        """
        needed = self.replicas_to_aggregate
        gradients = [tf.convert_to_tensor(g) for g in gradients]

        def take():
            for accumulator, gradient in zip(self.accumulators, gradients):
                accumulator.assign_add(gradient)
            taken = self.count.assign_add(1)

            def apply():
                apply_mean([a.read_value() / needed for a in self.accumulators])
                # Only once every weight holds the update (reads come after writes to
                # the same variable) does the version move and release the waiting.
                landed = [tf.identity(v.read_value()) for v in self.variables]
                with tf.control_dependencies(landed):
                    next_version = self.global_step.assign_add(1)
                for accumulator in self.accumulators:
                    accumulator.assign(tf.zeros_like(accumulator))
                self.count.assign(0)
                with tf.control_dependencies([next_version]):
                    self._releases.enqueue_many([tf.fill([needed - 1], version)])
                return tf.constant('applied')

            return tf.cond(taken >= needed, apply, lambda: tf.constant('waiting'))

        def drop():
            self.dropped.assign_add(1)
            return tf.constant('stale')

        def decide():
            current = self.global_step.read_value()
            return tf.cond(
                current >= self.target, lambda: tf.constant('done'),
                lambda: tf.cond(tf.equal(current, version), take, drop))

        outcome = self._lock.execute(decide)

        def wait_for_release():
            self._releases.dequeue()
            return tf.constant(0)

        tf.cond(tf.equal(outcome, 'waiting'), wait_for_release, lambda: tf.constant(0))
        return outcome
