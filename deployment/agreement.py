"""Multi-worker all-reduce needs every worker to issue the same collectives in the same
order: a call of N steps on one worker must meet a call of N steps on every other, or
their all-reduces never pair and all of them hang (measured: at 0 % CPU).

So before each call the workers agree, with one small all-reduce, on its length (the
chief's proposal, which it sizes by its own timing), on stopping (any worker's stop
request, e.g. a SIGTERM to one of them, stops every worker at the same step), and on the
step of the chief's newest checkpoint (which each worker's input position is saved with:
deployment.input_positions).

After the last call the workers also leave together (`leave_together`): a worker's part of
an all-reduce can end before a peer has fetched its last chunk from it, so a worker that
exited at once failed the slower peer's last call (1 run in 12 of two workers on a loaded
host). They meet at the coordination service's barrier first.
"""
import dataclasses
from typing import Callable, List, Optional

import tensorflow as tf
# The coordination service's barrier has no public API (DTensor calls it the same way).
from tensorflow.python.eager import context as eager_context

# A barrier's name is its identity in the coordination service: one use per cluster start.
_LEAVE_BARRIER = 'training_finished'
# The wait at the end covers the chief's work after its last call (a periodic save, a
# summary) while the other workers wait for it.
LEAVE_TIMEOUT_SECS = 600

# A step crosses the all-reduce as two float32 parts, each exact below 2**24.
_STEP_PART = 2 ** 20


@dataclasses.dataclass(frozen=True)
class CallPlan:
    """The next call of the inner loop: how many steps, or stop before it; once agreed
    across workers, also the step of the chief's newest checkpoint (None: none yet)."""
    num_steps: int
    stop: bool = False
    saved_step: Optional[int] = None


def _step_parts(step: Optional[int]) -> List[float]:
    """None -> [0, 0], step s -> s + 1 in two exact float32 parts."""
    value = 0 if step is None else step + 1
    return [float(value // _STEP_PART), float(value % _STEP_PART)]


def _step_from_parts(high: float, low: float) -> Optional[int]:
    value = int(round(high)) * _STEP_PART + int(round(low))
    return value - 1 if value else None


class CrossWorkerAgreement:
    """The chief's call length and newest checkpoint, and everyone's stop requests,
    known to every worker. `listeners` are told each agreed CallPlan."""

    def __init__(self, strategy: tf.distribute.Strategy, is_chief: bool):
        self._strategy = strategy
        self._chief = 1.0 if is_chief else 0.0
        # Each of this worker's replicas adds its copy to the sum.
        self._replicas_here = max(1, len(strategy.extended.worker_devices))
        self._sum = tf.function(self._sum_over_replicas, autograph=False)
        self.saved_step: Callable[[], Optional[int]] = lambda: None  # the chief's
        self.listeners: List[Callable[[CallPlan], None]] = []

    def _sum_over_replicas(self, values):
        def replica_fn(value):
            # A copy made on the replica's device: the all-reduce places by it.
            return tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, tf.identity(value))

        summed = self._strategy.run(replica_fn, args=(values,))
        return self._strategy.experimental_local_results(summed)[0]

    def agree(self, proposal: CallPlan) -> CallPlan:
        saved = _step_parts(self.saved_step())
        values = tf.constant([proposal.num_steps * self._chief, float(proposal.stop),
                              saved[0] * self._chief, saved[1] * self._chief], tf.float32)
        chief_steps, stops, high, low = self._sum(values).numpy() / self._replicas_here
        agreed = CallPlan(num_steps=int(round(chief_steps)), stop=stops > 0,
                          saved_step=_step_from_parts(high, low))
        for listener in self.listeners:
            listener(agreed)
        return agreed

    def leave_together(self, timeout_secs: float = LEAVE_TIMEOUT_SECS):
        """Returns once every worker has finished its last call or agreed stop: none of
        them needs another's tensors any more. Raises tf.errors.OpError if a worker
        stopped answering or timeout_secs passed first."""
        eager_context.context().wait_at_barrier(_LEAVE_BARRIER, int(timeout_secs * 1000))
