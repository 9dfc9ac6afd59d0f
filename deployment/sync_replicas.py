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
- Staging: per trainable variable, N slots ([N, *shape]) beside it on its ps task.
  Beside global_step (its "home" ps task): the count of committed slots, the worker
  of each, a drop counter, a `tf.CriticalSection` serialising every offer, and one
  release queue per worker.
- `offer(worker, version, target, gradients, apply_mean)`, inside the critical
  section: a gradient of the current version from a worker with none in this round is
  written whole into slot `count`, and only then does `count` move: that increment is
  the commit. The Nth commit applies the mean of the N slots (`apply_mean`: optimizer,
  moving averages), then, once every weight holds it, moves global_step, empties the
  round and puts a token carrying the round's version into the queue of each of the
  N - 1 workers waiting. Any other gradient is dropped and counted: stale (an older
  version) or a duplicate (a restarted worker's, whose dead self gave one already).
- `wait_for_release(worker, version)`: a worker whose gradient was taken waits for its
  token before its next step, as slim's token queue made it, so with N = M each update
  averages one gradient from every worker. Tokens of older rounds are discarded.

Guarantees: every applied update is the mean of exactly N complete gradients, from N
different workers, all computed from the weights of one version, and global_step counts
these updates. A worker never blocks on a slower one unless its own gradient is waiting
for the Nth, so with N < M training runs at the pace of the fastest N; with N = M it
needs every worker (a dead worker stalls it until it is back, as in slim). Weights are
read without the lock, so a worker that reads during an update gets a torn copy, but
the version it read first has moved on by then, so that gradient is dropped. Batch
norm's moving statistics are updated by every step, as slim's workers did.

Faults. A worker that dies inside its offer leaves at most part of one slot written and
uncounted; the next commit overwrites that slot whole. A worker that dies while waiting
leaves its token in its own queue, which only its restarted self reads (and discards as
old). Where the offer runs: its decisions and counters on the home ps task, each slot's
write, the mean and the update on the variable's own ps task; the worker only sends its
gradients (computed before the lock is taken) and learns the outcome, so once they have
arrived its death cannot tear a commit or an update. When it dies earlier, the home
task's part of the offer fails at its next receive from it and the lock is released; a
write on another ps task then either fails too (an input missing) or had all its inputs
(gradient and slot index) already and runs at once, before a next offer can have taken
the lock and sent that task its own slot index (TensorFlow orders nothing more here).

Memory: N copies of the trainable variables on the ps tasks (TF1's accumulators held
one running sum): the price of never counting half a gradient. Not checkpointed: a
resumed run starts a fresh round, since gradients staged before a restore belong to
weights the restore replaces. Checkpointed (`counters()`, saved and restored with
global_step): `updates_applied` and `gradients_applied`, the latter moved by the live
commit count of each update, so gradients_applied == N * updates_applied over the run
(a ps task that dies loses them with the weights; the restart restores both).
"""
from typing import Callable, Optional, Sequence

import tensorflow as tf

# Tokens a worker's queue can hold: one per round it waited in and died before taking.
_QUEUE_CAPACITY = 1 << 10

OUTCOMES = ('applied', 'waiting', 'stale', 'duplicate', 'done')


class SyncReplicas:
    """The slots, counters and queues of sync replicas; create under strategy.scope()."""

    # Test-only seam (tests/helpers/run_sync_replicas_training.py): called as
    # fault_point(stage, worker, version, taken) between the two halves of an offer's
    # slot writes (stage 'offer') and before a wait (stage 'wait'); the rest waits for
    # the tensor it returns. None in training.
    fault_point: Optional[Callable] = None

    def __init__(self, variables: Sequence[tf.Variable], global_step: tf.Variable,
                 replicas_to_aggregate: int, num_workers: int):
        if replicas_to_aggregate < 1:
            raise ValueError(f'replicas_to_aggregate must be at least 1, got '
                             f'{replicas_to_aggregate}.')
        self.replicas_to_aggregate = replicas_to_aggregate
        self.global_step = global_step
        self.variables = list(variables)
        strategy = tf.distribute.get_strategy()
        self.slots = []
        for variable in self.variables:
            with strategy.extended.colocate_vars_with(variable):
                self.slots.append(tf.Variable(
                    tf.zeros([replicas_to_aggregate, *variable.shape], variable.dtype),
                    trainable=False,
                    name=variable.name.split(':')[0].replace('/', '_') + '_sync_slots'))
        with strategy.extended.colocate_vars_with(global_step):
            self.count = tf.Variable(0, dtype=tf.int64, trainable=False,
                                     name='sync_replicas_count')
            self.slot_workers = tf.Variable(tf.fill([replicas_to_aggregate], tf.constant(-1, tf.int64)),
                                            dtype=tf.int64, trainable=False,
                                            name='sync_replicas_slot_workers')
            self.dropped = tf.Variable(0, dtype=tf.int64, trainable=False,
                                       name='sync_replicas_stale_gradients_dropped')
            self.updates_applied = tf.Variable(0, dtype=tf.int64, trainable=False,
                                               name='sync_replicas_updates_applied')
            self.gradients_applied = tf.Variable(0, dtype=tf.int64, trainable=False,
                                                 name='sync_replicas_gradients_applied')
        self._home = global_step.device
        with tf.device(self._home):
            self._lock = tf.CriticalSection(name='sync_replicas')
            self.release_queues = [
                tf.queue.FIFOQueue(_QUEUE_CAPACITY, [tf.int64], shapes=[[]],
                                   name=f'sync_replicas_releases_{worker}')
                for worker in range(num_workers)]

    def counters(self) -> dict:
        """The counters a checkpoint holds, by their keys."""
        return {'updates_applied': self.updates_applied,
                'gradients_applied': self.gradients_applied}

    def offer(self, worker, version, target, gradients: Sequence[tf.Tensor],
              apply_mean: Callable[[Sequence[tf.Tensor], tf.Tensor], None]) -> tf.Tensor:
        """Offers `worker`'s gradients computed at `version`; returns one of OUTCOMES:
        'applied' (the Nth: the update is applied), 'waiting' (taken: wait for the
        release), 'stale' or 'duplicate' (dropped and counted) or 'done' (a gradient of
        the current version, but global_step reached the round's `target`).

        apply_mean(mean_gradients, version) applies the update (optimizer, moving
        averages) on the parameter servers; global_step is moved here.
        """
        worker = tf.cast(worker, tf.int64)
        version = tf.cast(version, tf.int64)
        target = tf.cast(target, tf.int64)
        gradients = [tf.convert_to_tensor(g) for g in gradients]
        return self._lock.execute(
            lambda: self._offer_locked(worker, version, target, gradients, apply_mean))

    def _offer_locked(self, worker, version, target, gradients, apply_mean):
        needed = self.replicas_to_aggregate
        with tf.device(self._home):
            current = self.global_step.read_value()
            count = self.count.read_value()
            in_round = tf.range(needed, dtype=tf.int64) < count
            open_round = current < target
            current_version = tf.equal(current, version)
            fresh = open_round & current_version
            duplicate = fresh & tf.reduce_any(
                in_round & tf.equal(self.slot_workers.read_value(), worker))
            taken = fresh & ~duplicate
            # The slot to write: [count] if taken, else none ([]).
            rows = tf.reshape(count, [1])[:tf.cast(taken, tf.int32)]
        writes = self._stage(rows, gradients, worker, version, taken)
        with tf.control_dependencies(writes), tf.device(self._home):
            owner = tf.raw_ops.ResourceScatterUpdate(
                resource=self.slot_workers.handle, indices=rows,
                updates=tf.reshape(worker, [1])[:tf.size(rows)])
            with tf.control_dependencies([owner]):
                committed = self.count.assign_add(tf.cast(taken, tf.int64))  # the commit
            # A stale gradient counts as dropped also once the round is over: with a
            # call per update, that is when a backup's late gradient arrives.
            dropped = self.dropped.assign_add(tf.cast(~current_version | duplicate,
                                                      tf.int64))
            full = taken & (committed >= needed)
            applied = tf.cond(full, lambda: self._apply(apply_mean, current, committed),
                              self._not_applied)
            outcome = tf.where(~current_version, 'stale', tf.where(
                ~open_round, 'done', tf.where(duplicate, 'duplicate',
                                              tf.where(full, 'applied', 'waiting'))))
            # The lock is released once everything above has run.
            with tf.control_dependencies([committed, dropped, applied]):
                return tf.identity(outcome)

    def _stage(self, rows, gradients, worker, version, taken):
        """Writes each gradient into its variable's slot `rows` (none if empty), on that
        variable's ps task; the write ops."""
        with tf.device(self._home):
            size = tf.size(rows)

        def write(slot, gradient):
            with tf.device(slot.device):
                return tf.raw_ops.ResourceScatterUpdate(
                    resource=slot.handle, indices=rows,
                    updates=tf.expand_dims(gradient, 0)[:size])

        pairs = list(zip(self.slots, gradients))
        if self.fault_point is None:
            return [write(slot, gradient) for slot, gradient in pairs]
        half = len(pairs) // 2
        first = [write(slot, gradient) for slot, gradient in pairs[:half]]
        with tf.control_dependencies(first):
            fault = self.fault_point('offer', worker, version, taken)
        with tf.control_dependencies([fault]):
            return first + [write(slot, gradient) for slot, gradient in pairs[half:]]

    def _apply(self, apply_mean, version, committed):
        """The Nth commit's work: the update, then the version and the counters (the
        gradients the live `committed` count says were combined), then the releases."""
        needed = self.replicas_to_aggregate
        means = []
        for slot in self.slots:
            with tf.device(slot.device):
                means.append(tf.reduce_mean(slot.read_value(), axis=0))
        with tf.device(self._home):
            apply_mean(means, version)
        # Read after the update's writes to each variable (program order), on its ps.
        landed = [variable.read_value() for variable in self.variables]
        with tf.control_dependencies(landed), tf.device(self._home):
            moved = self.global_step.assign_add(1)
        with tf.control_dependencies([moved]), tf.device(self._home):
            counted = [self.updates_applied.assign_add(1),
                       self.gradients_applied.assign_add(committed)]
            emptied = self.count.assign(0)
            # Slots 0..N-2 are the waiting workers' (slot N-1 is this offer's).
            waiting = self.slot_workers.read_value()[:needed - 1]
            releases = [
                queue.enqueue_many([tf.fill(
                    [tf.math.count_nonzero(tf.equal(waiting, worker), dtype=tf.int32)],
                    version)])
                for worker, queue in enumerate(self.release_queues)]
        with tf.control_dependencies([emptied, *releases, *counted]), \
                tf.device(self._home):
            return tf.constant(True)

    def _not_applied(self):
        with tf.device(self._home):
            return tf.constant(False)

    def wait_for_release(self, worker, version) -> tf.Tensor:
        """Blocks until the update of `version` is applied (`worker`'s token for it);
        tokens of older rounds (left by a dead waiter) are discarded. Returns the token."""
        version = tf.cast(version, tf.int64)
        worker = tf.cast(worker, tf.int64)
        if self.fault_point is not None:
            with tf.control_dependencies(
                    [self.fault_point('wait', worker, version, tf.constant(True))]):
                worker = tf.identity(worker)

        def wait_on(queue):
            def take_tokens():
                return tf.while_loop(lambda token: token < version,
                                     lambda token: queue.dequeue(), [queue.dequeue()])[0]
            return take_tokens

        return tf.switch_case(tf.cast(worker, tf.int32),
                              [wait_on(queue) for queue in self.release_queues])
