"""Quantization-aware training (TF1 contrib.quantize's `--quantize_delay`) for every net.

`nets_factory.get_network_fn(..., quantization=QuantizationParams(delay=S))` builds a net
whose weighted layers (conv, separable conv, fully connected) carry fake quantization
as TFLite's int8 kernels compute it (the layer kit's `fake_quant`):

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
import tensorflow as tf

from nets.layers import WeightedLayer
from nets.layers.fake_quant import (  # noqa: F401  (this module is their public face)
    INPUT_RANGE_SCOPE, RANGE_SCOPE, ActivationQuantizer, Quantization, QuantizationParams,
    fake_quantize_weights)


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
