"""How replicas' gradients become one update: the middle of the step split.

The training step is compute gradients -> aggregate -> apply. Aggregation is the only
part that depends on the distribution mode:
- synchronous replicas (one device, MirroredStrategy, MultiWorkerMirroredStrategy):
  an all-reduce SUM across replicas (each replica scales its loss by 1/num_replicas);
- asynchronous parameter servers: none; each worker applies its own gradients;
- sync replicas over parameter servers (slim's --sync_replicas): all-reduce within the
  worker, then deployment.sync_replicas averages --replicas_to_aggregate workers'
  gradients of the same parameter version, dropping stale ones.
Every aggregator runs in replica context, inside `strategy.run`.
"""
from typing import List, Sequence, Tuple

import tensorflow as tf

GradsAndVars = List[Tuple[tf.Tensor, tf.Variable]]


class AllReduce:
    """Sums each gradient over the replicas in sync; every replica gets the sum."""

    def aggregate(self, grads_and_vars: Sequence) -> GradsAndVars:
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            return []
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return pairs
        summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [g for g, _ in pairs])
        return list(zip(summed, [v for _, v in pairs]))


class Independent:
    """Asynchronous training: each worker's gradients are applied as they are."""

    def aggregate(self, grads_and_vars: Sequence) -> GradsAndVars:
        return [(g, v) for g, v in grads_and_vars if g is not None]


def is_parameter_server(strategy: tf.distribute.Strategy) -> bool:
    return isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)
