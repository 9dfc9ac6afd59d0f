"""Multi-worker all-reduce needs every worker to issue the same collectives in the same
order: a call of N steps on one worker must meet a call of N steps on every other, or
their all-reduces never pair and all of them hang (measured: at 0 % CPU).

So before each call the workers agree, with one small all-reduce, on its length (the
chief's proposal, which it sizes by its own timing) and on stopping (any worker's stop
request, e.g. a SIGTERM to one of them, stops every worker at the same step).
"""
import dataclasses

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class CallPlan:
    """The next call of the inner loop: how many steps, or stop before it."""
    num_steps: int
    stop: bool = False


class CrossWorkerAgreement:
    """The chief's call length and everyone's stop requests, known to every worker."""

    def __init__(self, strategy: tf.distribute.Strategy, is_chief: bool):
        self._strategy = strategy
        self._chief = 1.0 if is_chief else 0.0
        # Each of this worker's replicas adds its copy to the sum.
        self._replicas_here = max(1, len(strategy.extended.worker_devices))
        self._sum = tf.function(self._sum_over_replicas, autograph=False)

    def _sum_over_replicas(self, values):
        def replica_fn(value):
            # A copy made on the replica's device: the all-reduce places by it.
            return tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, tf.identity(value))

        summed = self._strategy.run(replica_fn, args=(values,))
        return self._strategy.experimental_local_results(summed)[0]

    def agree(self, proposal: CallPlan) -> CallPlan:
        values = tf.constant([proposal.num_steps * self._chief, float(proposal.stop)],
                             tf.float32)
        chief_steps, stops = self._sum(values).numpy() / self._replicas_here
        return CallPlan(num_steps=int(round(chief_steps)), stop=stops > 0)
