"""Quantization-aware training (TF1 contrib.quantize's `--quantize_delay`) for every net.

`enable(network, QuantizationParams(delay=S))`, before the net is first called, gives
each weighted layer of the layer kit (conv, separable conv, fully connected) fake
quantization as TFLite's int8 kernels compute:

- weights: symmetric, narrow-range int8 ([-127, 127], zero point 0), on each layer's
  largest absolute weight: per output channel for convolutions (and separable
  convolutions' pointwise weights); per tensor for matmul layers (fully connected, and
  convolutions spanning their whole input) and depthwise weights, because the TFLite
  converter (TF 2.21) rejects per-channel fake quantization there: on MatMul weights
  "'tfl.transpose' op has mismatched quantized axes", and TF's depthwise layout
  [h, w, in, multiplier] has no output-channel axis the op can quantize along without
  a reshape the converter refuses. The gradient passes straight through (the range
  covers every weight).
- activations: asymmetric 8 bits on [min, max], the moving averages (decay
  `range_decay`) of the batch minimum and maximum, at the net's input and at each
  weighted layer's output after batch norm and activation, where TFLite fuses
  conv + batch norm + ReLU into one int8 kernel. Values outside the range get no
  gradient. The ranges are non-trainable variables '<layer>/act_quant/min' and
  '.../max' (TF1's names), saved in checkpoints; they are tracked from the first
  training step (the first batch sets them), so they are settled when fake
  quantization starts at step `delay`.

Batch norm is not folded into the weights during training: per-channel weight
quantization commutes with batch norm's per-channel scale, so quantizing the unfolded
weights gives the same int8 weights the converter computes after folding.

In training, fake quantization is on from step `delay` (the `step` the Trainer passes
to the net); at inference (evaluation, export) it is always on, so a quantization-aware
checkpoint is evaluated and exported as the int8 model computes. Other tensors
(residual sums, concatenations, pools) carry no fake quantization; the int8 TFLite
export calibrates those on representative images and takes every range above from the
checkpoint (export.tflite).
"""
import contextlib
import dataclasses
import threading

import tensorflow as tf

from nets import layers

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
    current call of the net (per thread: MirroredStrategy traces replicas in threads)."""

    def __init__(self, params: QuantizationParams):
        self.params = params
        self._call = threading.local()

    @contextlib.contextmanager
    def applied(self, step, training: bool):
        """Within a call of the net at `step` (None: unknown, treated as past the delay)."""
        if not training or step is None or not self.params.delay:
            active = True
        else:
            active = tf.greater_equal(tf.cast(step, tf.int64), self.params.delay)
        previous = getattr(self._call, 'active', True)
        self._call.active = active
        try:
            yield
        finally:
            self._call.active = previous

    def when_active(self, quantized_fn, values):
        """quantized_fn(values) when fake quantization is on, else values."""
        active = getattr(self._call, 'active', True)
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


class ActivationQuantizer(layers.Module):
    """Fake quantization of a tensor on its range, tracked in training by moving
    averages of the batch minimum and maximum (widened to hold 0, as int8 needs)."""

    def __init__(self, quantization: Quantization, name: str = RANGE_SCOPE):
        super().__init__(name)
        self.quantization = quantization
        self.min = self.max = None

    def forward(self, inputs, *, training: bool):
        if self.min is None:
            statistics = dict(trainable=False,
                              synchronization=tf.VariableSynchronization.ON_READ,
                              aggregation=tf.VariableAggregation.MEAN)
            self.min = self._add_variable('min', [], layers.zeros_initializer(), **statistics)
            self.max = self._add_variable('max', [], layers.zeros_initializer(), **statistics)
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


def enable(network, params: QuantizationParams) -> Quantization:
    """Gives `network` (a nets.network.Network, not yet called) quantization-aware
    fake quantization; returns the shared Quantization."""
    if network.variables:
        raise ValueError('Enable quantization before the network is first called (its '
                         'range variables are created with the others).')
    quantization = Quantization(params)
    network.quantization = quantization
    network.input_quantizer = ActivationQuantizer(quantization, INPUT_RANGE_SCOPE)
    weighted_layers = list(network._flatten(  # pylint: disable=protected-access
        predicate=lambda m: isinstance(m, layers.Module) and hasattr(type(m), 'act_quant')))
    for module in weighted_layers:
        module.quantization = quantization
        module.act_quant = ActivationQuantizer(quantization)
    return quantization


def is_range(variable_name: str) -> bool:
    """Whether a variable is an activation range (a float checkpoint lacks them: the
    first training batch sets them)."""
    scopes = variable_name.split('/')[:-1]
    return RANGE_SCOPE in scopes or INPUT_RANGE_SCOPE in scopes


def is_quantization_aware(checkpoint_path: str) -> bool:
    """Whether a checkpoint (prefix) holds activation ranges: TF1 names or this
    toolkit's object paths, both with '.../act_quant/min'."""
    return any(f'{RANGE_SCOPE}/min' in name
               for name, _ in tf.train.list_variables(checkpoint_path))
