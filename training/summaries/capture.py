"""What TensorBoard needs from inside the training step, kept only on summary steps.

TF-Slim's summaries saw the step's own tensors: `activations/<end point>` histograms
and `sparsity/<end point>` (the zero fraction) of clone 0's forward pass, and each
variable's `<name>/gradient` histogram and `<name>/gradient_norm`. Here the compiled
step writes their histogram buckets and scalars into small variables, inside a
`tf.cond` that runs only on the step the summary writer armed (the last step of the
call before a summary is due). The writer (training.summaries.train_summaries) reads them on the
chief, outside the step.

The capture's ops (a histogram per end point and per gradient) tripled the time to
trace and optimise a big net's step, so the inner loop traces two steps: one without
them, used unless a capture is armed, and one with them, traced when the first summary
is due. Under multi-worker all-reduce every worker must run the same function (their
collectives are matched by trace), so there the capture is in every step
(deployment.steps) and the other workers never take the branch.

The variables are one copy per replica (ON_READ) holding the first replica's values, so
a capture needs no communication.
"""
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from core.naming import slim_name

HISTOGRAM_BUCKETS = 30  # TensorBoard's default
# End points captured, at most (resnet_v2_200 has 277). A fixed size: XLA cannot change
# a variable's shape, and the end points are known only once the step is traced.
MAX_END_POINTS = 512
_NEVER = np.iinfo(np.int64).max


def histogram_buckets(values, bucket_count: int = HISTOGRAM_BUCKETS) -> tf.Tensor:
    """[bucket_count, 3] float32 (left edge, right edge, count) of equal-width buckets
    between the finite values' minimum and maximum, the last bucket closed (as
    numpy.histogram): TensorBoard's histogram layout, from ops XLA compiles (no
    histogram_fixed_width). Values all equal go to the last bucket, as TensorBoard's own
    histogram puts them; infinities and NaNs (a float16 overflow) are left out of the
    counts instead of turning every edge into NaN."""
    flat = tf.reshape(tf.cast(values, tf.float32), [-1])
    finite = tf.math.is_finite(flat)
    any_finite = tf.reduce_any(finite)
    low = tf.where(any_finite, tf.reduce_min(tf.where(finite, flat, np.inf)), 0.0)
    high = tf.where(any_finite, tf.reduce_max(tf.where(finite, flat, -np.inf)), 0.0)
    width = (high - low) / bucket_count
    offsets = tf.where(finite, flat, low) - low
    index = tf.where(width > 0,
                     tf.math.floor(offsets / tf.where(width > 0, width, 1.0)),
                     bucket_count - 1.0)
    index = tf.cast(tf.clip_by_value(index, 0, bucket_count - 1), tf.int32)
    # Non-finite values counted in an extra bucket, dropped. DenseBincount of a constant
    # size compiles with XLA and, on CPU, counts ~15x faster than unsorted_segment_sum;
    # int32 counts stay exact past 2**24 values (float32 sums stop there).
    counts = tf.raw_ops.DenseBincount(
        input=tf.where(finite, index, bucket_count), size=bucket_count + 1,
        weights=tf.zeros([0], tf.int32), binary_output=False)[:bucket_count]
    edges = tf.concat([low + width * tf.range(bucket_count, dtype=tf.float32), [high]], 0)
    return tf.stack([edges[:-1], edges[1:], tf.cast(counts, tf.float32)], axis=1)


def _first_replica_copy(initial_value, shape=None):
    """One copy per replica, read as the first replica's (no all-reduce on read)."""
    return tf.Variable(initial_value, trainable=False, shape=shape,
                       synchronization=tf.VariableSynchronization.ON_READ,
                       aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


class SummaryCapture:
    """The step's activation and gradient summaries, captured when armed; created under
    the strategy's scope on every worker (the same variables everywhere)."""

    def __init__(self, global_step: tf.Variable, train_variables: Sequence[tf.Variable]):
        self.global_step = global_step
        self.variable_names = [slim_name(v) for v in train_variables]
        self._index = {v.ref(): i for i, v in enumerate(train_variables)}
        # The step to capture: set on the host before a call (arm), never by the step.
        self.capture_step = tf.Variable(_NEVER, dtype=tf.int64, trainable=False)
        count = len(train_variables)
        self.gradients_step = _first_replica_copy(tf.constant(-1, tf.int64))
        self.gradient_histograms = _first_replica_copy(
            tf.zeros([count, HISTOGRAM_BUCKETS, 3]))
        self.gradient_norms = _first_replica_copy(tf.zeros([count]))
        # The end points' names are recorded when the step is traced.
        self.end_point_names = []
        self.activations_step = _first_replica_copy(tf.constant(-1, tf.int64))
        self.activation_histograms = _first_replica_copy(
            tf.zeros([MAX_END_POINTS, HISTOGRAM_BUCKETS, 3]))
        self.zero_fractions = _first_replica_copy(tf.zeros([MAX_END_POINTS]))
        self._armed = None

    @property
    def armed(self) -> bool:
        """Whether the coming call captures (needs the step traced with the capture)."""
        return self._armed is not None

    def arm(self, step: Optional[int]):
        """Captures at `step` (the last step of the coming call), or never (None)."""
        if step != self._armed:
            self.capture_step.assign(_NEVER if step is None else step)
            self._armed = step

    def _when_due(self, capture):
        due = self.global_step.read_value() >= self.capture_step.read_value()
        tf.cond(due, lambda: (capture(), tf.constant(True))[1], lambda: tf.constant(False))

    def capture_activations(self, end_points: Dict[str, tf.Tensor]):
        """Zero fraction and histogram of each floating end point (in a step traced
        with the capture)."""
        named = {name: value for name, value in end_points.items()
                 if isinstance(value, tf.Tensor) and value.dtype.is_floating}
        self.end_point_names[:] = list(named)[:MAX_END_POINTS]
        values = list(named.values())[:MAX_END_POINTS]
        if not values:
            return
        padding = MAX_END_POINTS - len(values)

        def capture():
            fractions = tf.stack([tf.math.zero_fraction(v) for v in values])
            histograms = tf.stack([histogram_buckets(v) for v in values])
            self.zero_fractions.assign(tf.pad(fractions, [[0, padding]]))
            self.activation_histograms.assign(tf.pad(histograms, [[0, padding], [0, 0],
                                                                  [0, 0]]))
            self.activations_step.assign(self.global_step.read_value())

        self._when_due(capture)

    def capture_gradients(self, grads_and_vars):
        """Histogram and norm of each variable's gradient as applied (after aggregation);
        variables without a gradient keep zeros."""
        grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
        if not grads_and_vars:
            return

        def capture():
            empty = tf.zeros([HISTOGRAM_BUCKETS, 3])
            histograms = [empty] * len(self.variable_names)
            norms = [tf.constant(0.0)] * len(self.variable_names)
            for gradient, variable in grads_and_vars:
                index = self._index.get(variable.ref())
                if index is None:
                    continue
                gradient = tf.convert_to_tensor(gradient)
                histograms[index] = histogram_buckets(gradient)
                norms[index] = tf.norm(tf.cast(gradient, tf.float32))
            self.gradient_histograms.assign(tf.stack(histograms))
            self.gradient_norms.assign(tf.stack(norms))
            self.gradients_step.assign(self.global_step.read_value())

        self._when_due(capture)

    def captured(self, strategy: tf.distribute.Strategy) -> dict:
        """What the last capture holds, as numpy, from this process's first replica
        (no communication): {'activations_step', 'zero_fractions', ...}."""
        def local(variable):
            return strategy.experimental_local_results(variable)[0].numpy()

        return {name: local(getattr(self, name)) for name in (
            'activations_step', 'zero_fractions', 'activation_histograms',
            'gradients_step', 'gradient_histograms', 'gradient_norms')}
