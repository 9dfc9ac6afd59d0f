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
from absl import logging

from deployment.weight_factors import Factored

GradsAndVars = List[Tuple[tf.Tensor, tf.Variable]]


class AllReduce:
    """Sums each gradient over the replicas in sync; every replica gets the sum.

    A matmul weight's gradient given as factors (deployment.weight_factors.Factored)
    crosses as its factors: each replica puts its rows, [inputs | output gradients],
    in its own slot of a zero matrix of every replica's rows, so the sum (in the same
    all-reduce as the other gradients) stacks them all; each replica then multiplies
    them, and adds the weight's other terms (equal on every replica) once per replica.
    """

    def __init__(self):
        self._described = False  # the factored weights are logged at the first trace

    def aggregate(self, grads_and_vars: Sequence) -> GradsAndVars:
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            return []
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return pairs  # (nothing is recorded as factors for one replica)
        replicas = context.num_replicas_in_sync
        sent = [_in_replica_slot(g, context.replica_id_in_sync_group, replicas)
                if isinstance(g, Factored) else g for g, _ in pairs]
        if not self._described:
            self._described = True
            _describe_factors(pairs, sent)
        summed = context.all_reduce(tf.distribute.ReduceOp.SUM, sent)
        return [(_from_factors(g, total, v, replicas) if isinstance(g, Factored) else total,
                 v) for (g, v), total in zip(pairs, summed)]


def _describe_factors(pairs, sent):
    factored = [v.name for g, v in pairs if isinstance(g, Factored)]
    if not factored:
        return

    def megabytes(tensors):
        return sum(t.shape.num_elements() * t.dtype.size for t in tensors) / 1e6

    logging.info('All-reduce: %d weight(s) as their gradients\' factors (%s): %.1f MB '
                 'per step instead of %.1f MB.', len(factored), ', '.join(factored),
                 megabytes(sent), megabytes([v for _, v in pairs]))


def _in_replica_slot(factored: Factored, replica_id, replicas: int) -> tf.Tensor:
    """[replicas * max_rows, M + N]: this replica's [inputs | output gradients] from
    row replica_id * max_rows on, zeros elsewhere (zero rows add nothing to the product,
    so a short batch fits)."""
    rows = tf.concat([tf.cast(factored.inputs, tf.float32),
                      tf.cast(factored.output_gradients, tf.float32)], axis=1)
    count = tf.shape(rows)[0]
    with tf.control_dependencies([tf.debugging.assert_less_equal(
            count, factored.max_rows, message='more rows than a full batch')]):
        before = tf.cast(replica_id, tf.int32) * factored.max_rows
    stacked = tf.pad(rows, [[before, replicas * factored.max_rows - before - count], [0, 0]])
    return tf.ensure_shape(stacked, [replicas * factored.max_rows, rows.shape[1]])


def _from_factors(factored: Factored, stacked: tf.Tensor, variable, replicas: int):
    """The summed gradient from every replica's stacked factors."""
    inputs = factored.inputs.shape[-1]
    gradient = tf.reshape(tf.matmul(stacked[:, :inputs], stacked[:, inputs:],
                                    transpose_a=True), variable.shape)
    if factored.rest is not None:  # each replica's copy, summed
        gradient += factored.rest * replicas
    return tf.cast(gradient, variable.dtype)


class Independent:
    """Asynchronous training: each worker's gradients are applied as they are."""

    def aggregate(self, grads_and_vars: Sequence) -> GradsAndVars:
        return [(g, v) for g, v in grads_and_vars if g is not None]


def is_parameter_server(strategy: tf.distribute.Strategy) -> bool:
    return isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)
