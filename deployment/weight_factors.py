"""Weight gradients as factors, for the all-reduce between workers.

A matmul layer's weight gradient is inputs^T @ output_gradients: for R replicas of B
rows each and an M x N weight, R x B x (M + N) numbers give the M x N sum over replicas
(the "sufficient factors" of Xie et al., 2015). When they are at most half the weight's
size, the step all-reduces them instead of the gradient, and each worker multiplies
them: the same sum, added in another order.

The training step passes a `Recording` to its net's call when the plan factors weight
gradients (multi-worker all-reduce); the net lends it to its matmul layers
(nets.layers.weighted.recording_products). A layer whose weight is worth factoring
records its inputs and outputs and stops its weight's gradient through the product: the
tape then gives the weight's other terms (weight decay), and the outputs' gradient,
which `Recording.gradient` asks for. deployment.aggregation all-reduces the factors and
multiplies them.
"""
import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

import tensorflow as tf


@dataclasses.dataclass
class Factored:
    """One replica's gradient of a matmul weight: `rest` + inputs^T @ output_gradients.

    rest: the gradient of the loss's other terms (weight decay), a function of the
    weight alone and so equal on every replica; None if there are none.
    """
    rest: Optional[tf.Tensor]
    inputs: tf.Tensor            # [rows, M]
    output_gradients: tf.Tensor  # [rows, N]
    max_rows: int                # rows at most: the same on every replica (a full batch)


def worth_factoring(weight_shape: Sequence[int], rows: Optional[int], replicas: int) -> bool:
    """Whether every replica's factors, stacked, are at most half the weight's size."""
    if rows is None or replicas < 2:
        return False
    inputs, outputs = math.prod(weight_shape[:-1]), weight_shape[-1]
    return 2 * replicas * rows * (inputs + outputs) <= inputs * outputs


class Recording:
    """Records the factors of `variables` worth factoring, in the layers of the net call
    it is given to, for `tape`; `replicas`: the replicas in sync;
    `batch_size`: the per-replica batch, a bound on a layer's rows where its batch
    dimension is not static (a distributed input's)."""

    def __init__(self, variables: Sequence[tf.Variable], replicas: int, batch_size: int,
                 tape: tf.GradientTape):
        self._candidates = {v.ref() for v in variables}
        self._tape = tape
        self.replicas = replicas
        self.batch_size = batch_size
        # variable ref -> [(inputs, outputs)], one pair per call of its layer.
        self.records: Dict[object, List[Tuple[tf.Tensor, tf.Tensor]]] = {}

    def max_rows(self, inputs: tf.Tensor) -> int:
        """A bound on the rows of `inputs` that is the same on every replica (a short
        last batch on one replica has fewer rows)."""
        return max(inputs.shape[0] or 0, self.batch_size)

    def wants(self, variable, inputs) -> bool:
        """Whether this call of `variable`'s layer is recorded as factors."""
        ref = variable.ref()
        if ref in self.records:  # called again: each call's product must be stopped too
            return True
        return (ref in self._candidates
                and worth_factoring(variable.shape, self.max_rows(inputs), self.replicas))

    def record(self, variable, inputs, outputs):
        # Watched: with its weight's path stopped, the product may hang on no watched
        # tensor (a layer on the input), and the tape would not reach it.
        self._tape.watch(outputs)
        self.records.setdefault(variable.ref(), []).append((inputs, outputs))

    def gradient(self, target: tf.Tensor, variables: Sequence[tf.Variable]) -> list:
        """The tape's gradients of `target` for `variables`, each recorded weight's as
        its Factored: the tape's own gradient of it (now its other terms) as `rest`, and
        the gradients of its recorded outputs."""
        pairs = [(ref, pair) for ref, calls in self.records.items() for pair in calls]
        outputs = [out for _, (_, out) in pairs]
        gradients = self._tape.gradient(target, [*variables, *outputs])
        kept = {}  # ref -> [(inputs, output gradients)] of the calls that reach the target
        for (ref, (inputs, _)), grad in zip(pairs, gradients[len(variables):]):
            if grad is not None:
                kept.setdefault(ref, []).append((inputs, grad))
        result = []
        for variable, gradient in zip(variables, gradients):
            calls = kept.get(variable.ref())
            if calls:
                gradient = Factored(gradient, tf.concat([i for i, _ in calls], 0),
                                    tf.concat([g for _, g in calls], 0),
                                    sum(self.max_rows(i) for i, _ in calls))
            result.append(gradient)
        return result

