"""The fake quantizers of quantization-aware training (nets/quantization.py says what
they compute and why): one `Quantization` per net, shared by its weighted layers, and an
`ActivationQuantizer` per tracked range."""
import contextlib
import dataclasses

import tensorflow as tf

from nets.layers.initializers import zeros_initializer
from nets.layers.module import Module

# Every weighted layer's output range lives under a scope of this name: what marks a
# checkpoint as quantization-aware. The net's input range has its own.
RANGE_SCOPE = 'act_quant'
INPUT_RANGE_SCOPE = 'input_quant'


@dataclasses.dataclass(frozen=True)
class QuantizationParams:
    """Fake quantization from training step `delay` on (0: from the start)."""
    delay: int = 0
    num_bits: int = 8
    range_decay: float = 0.999

    def __post_init__(self):
        if self.delay < 0:
            raise ValueError(f'The quantization delay is a step (0 or more), got {self.delay}.')
        if not 2 <= self.num_bits <= 16:
            raise ValueError(f'num_bits must be in [2, 16], got {self.num_bits}.')


class Quantization:
    """One net's quantization: its params, and whether fake quantization is on in the
    current call of the net (set by the net's call from its `step` argument; replicas
    traced in MirroredStrategy's threads take turns, one whole call at a time)."""

    def __init__(self, params: QuantizationParams):
        self.params = params
        self._active = True  # in the current call: True, or a boolean tensor

    @contextlib.contextmanager
    def applied(self, step, training: bool):
        """Within a call of the net at `step` (None: unknown, treated as past the delay)."""
        if not training or step is None or not self.params.delay:
            active = True
        else:
            active = tf.greater_equal(tf.cast(step, tf.int64), self.params.delay)
        previous, self._active = self._active, active
        try:
            yield
        finally:
            self._active = previous

    def when_active(self, quantized_fn, values):
        """quantized_fn(values) when fake quantization is on, else values."""
        active = self._active
        if active is True:
            return quantized_fn(values)
        return tf.cond(active, lambda: quantized_fn(values), lambda: tf.identity(values))

    def weights(self, weights: tf.Tensor, per_channel: bool) -> tf.Tensor:
        """Fake-quantized float32 weights (the output channels last)."""
        return self.when_active(
            lambda w: fake_quantize_weights(w, self.params.num_bits, per_channel),
            tf.convert_to_tensor(weights))


def fake_quantize_weights(weights: tf.Tensor, num_bits: int = 8,
                          per_channel: bool = True) -> tf.Tensor:
    """Symmetric narrow-range fake quantization on the largest absolute weight, per
    output channel (the last axis) or per tensor."""
    if per_channel:
        # On the weights as they are: a reshape around the op hides the quantized axis
        # from the converter ("'tfl.reshape' op requires 'output' type ...").
        axes = list(range(weights.shape.rank - 1))
        limit = tf.maximum(tf.stop_gradient(tf.reduce_max(tf.abs(weights), axis=axes)), 1e-8)
        return tf.quantization.fake_quant_with_min_max_vars_per_channel(
            weights, -limit, limit, num_bits=num_bits, narrow_range=True)
    limit = tf.maximum(tf.stop_gradient(tf.reduce_max(tf.abs(weights))), 1e-8)
    return tf.quantization.fake_quant_with_min_max_vars(
        weights, -limit, limit, num_bits=num_bits, narrow_range=True)


class ActivationQuantizer(Module):
    """Fake quantization of a tensor on its range, tracked in training by moving
    averages of the batch minimum and maximum (widened to hold 0, as int8 needs)."""

    def __init__(self, quantization: Quantization, name: str = RANGE_SCOPE):
        super().__init__(name)
        self.quantization = quantization
        self.min = self.max = None

    def forward(self, inputs, *, training: bool):
        if self.min is None:
            # Per replica, read as the first's: as batch norm's moving statistics.
            statistics = dict(trainable=False,
                              synchronization=tf.VariableSynchronization.ON_READ,
                              aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            self.min = self._add_variable('min', [], zeros_initializer(), **statistics)
            self.max = self._add_variable('max', [], zeros_initializer(), **statistics)
        values = tf.cast(inputs, tf.float32)
        if training:
            self._track(values)
        params = self.quantization.params
        quantized = self.quantization.when_active(
            lambda x: tf.quantization.fake_quant_with_min_max_vars(
                x, self.min, self.max, num_bits=params.num_bits), values)
        return tf.cast(quantized, inputs.dtype)

    def _track(self, values):
        batch_min = tf.minimum(tf.reduce_min(values), 0.0)
        batch_max = tf.maximum(tf.reduce_max(values), 0.0)
        keep = self.quantization.params.range_decay
        # Equal ends (both still 0) mean no batch was seen yet: take the batch's range.
        seen = self.max > self.min
        self.min.assign(tf.where(seen, keep * self.min + (1 - keep) * batch_min, batch_min))
        self.max.assign(tf.where(seen, keep * self.max + (1 - keep) * batch_max, batch_max))
