"""Layers with weights, as slim's: conv of any rank, separable conv, fully connected.

Each is weights, then batch norm or biases, then the activation; in a
quantization-aware net (`quantization=`, nets/quantization.py) its weights are
fake-quantized and its output is fake-quantized on a tracked range, 'act_quant'.

Variables take slim's names ('Conv/weights', 'Conv/BatchNorm/gamma'), or with
`naming='keras'` those of Keras and tf.layers ('conv2d/kernel', 'bias',
'depthwise_kernel'), whose batch norm is a layer of its own beside the convolution
('tpu_batch_normalization/gamma', named by `normalizer_name`), so that checkpoints of
the official EfficientNet releases restore by name.

A matmul layer (fully connected, or a conv covering its whole input) may hand its
product to a recording that its net lends it for one call (`recording_products`): any
object with `wants(variable, inputs) -> bool` and `record(variable, inputs, outputs)`.
When the recording wants it, the layer stops its weights' gradient through the product
and records the product's inputs and outputs; the recording's owner forms that gradient
itself (deployment.weight_factors does, for the all-reduce between workers).
"""
import contextlib
import math
from typing import Optional, Sequence, Union

import tensorflow as tf

from nets.layers.fake_quant import ActivationQuantizer, Quantization
from nets.layers.initializers import xavier_initializer, zeros_initializer
from nets.layers.module import Module
from nets.layers.normalization import BatchNorm

IntTuple = Union[int, Sequence[int]]


def as_tuple(value: IntTuple, rank: int) -> tuple:
    return (value,) * rank if isinstance(value, int) else tuple(value)


# Variable names by naming convention; a role not listed keeps slim's name.
VARIABLE_NAMES = {
    'slim': {},
    'keras': {'weights': 'kernel', 'biases': 'bias', 'depthwise_weights': 'depthwise_kernel',
              'pointwise_weights': 'pointwise_kernel'},
}


def read(variable, dtype):
    """A float32 variable's value in the compute dtype."""
    return variable if variable.dtype == dtype else tf.cast(variable, dtype)


class WeightedLayer(Module):
    """Weights, then batch norm or biases, then the activation, as slim's layers."""

    def __init__(self, name, *, activation=tf.nn.relu, weights_initializer=None,
                 biases_initializer=zeros_initializer(), weight_decay=0.0, normalizer=None,
                 normalizer_name='BatchNorm', biases_weight_decay=0.0,
                 quantization: Optional[Quantization] = None, naming: str = 'slim'):
        super().__init__(name)
        if naming not in VARIABLE_NAMES:
            raise ValueError(f'naming must be one of {sorted(VARIABLE_NAMES)}, got {naming!r}.')
        self._variable_names = VARIABLE_NAMES[naming]
        # Keras names the batch norm as a layer beside this one, not inside it.
        self._normalizer_beside = naming == 'keras'
        self.biases_weight_decay = biases_weight_decay
        self.activation = activation
        self.weights_initializer = weights_initializer or xavier_initializer()
        self.biases_initializer = biases_initializer
        self.weight_decay = weight_decay
        self.batch_norm = (BatchNorm(normalizer_name, normalizer)
                           if normalizer is not None else None)
        # Quantization-aware: the net's shared switch, and this layer's output range.
        self.quantization = quantization
        self.act_quant = ActivationQuantizer(quantization) if quantization else None
        self.biases = None
        self._built = False
        self._product_recording = None  # lent for one call (recording_products)

    def _children(self):
        children = super()._children()
        if self._normalizer_beside:
            return [child for child in children if child is not self.batch_norm]
        return children

    def resolve_scopes(self, parent_scope: str = ''):
        super().resolve_scopes(parent_scope)
        if self._normalizer_beside and self.batch_norm is not None:
            # Beside this layer: in the scope that holds its own ('stem/conv2d' -> 'stem').
            self.batch_norm.resolve_scopes(self.scope.rpartition('/')[0])

    def _variable_name(self, role):
        return self._variable_names.get(role, role)

    def _add_weights(self, name, shape):
        return self._add_variable(self._variable_name(name), shape, self.weights_initializer,
                                  weight_decay=self.weight_decay)

    def _add_biases(self, depth):
        # As in slim, a normalised layer has no biases (batch norm's beta replaces them).
        if self.batch_norm is None and self.biases_initializer is not None:
            self.biases = self._add_variable(self._variable_name('biases'), [depth],
                                             self.biases_initializer,
                                             weight_decay=self.biases_weight_decay)

    def _read_weights(self, weights, dtype, per_channel=True):
        """The weights in the compute dtype, fake-quantized in quantization-aware nets."""
        if self.quantization is not None:
            weights = self.quantization.weights(weights, per_channel)
        return read(weights, dtype)

    def _matmul(self, inputs, weights):
        """inputs [rows, M] @ weights [M, N], the value of self.weights as read (cast,
        reshaped); handed to the lent recording when it wants it. Never in a
        quantization-aware net, whose fake-quantized weights' gradient is clipped."""
        recording = self._product_recording
        if (self.quantization is not None or recording is None
                or not recording.wants(self.weights, inputs)):
            return tf.matmul(inputs, weights)
        outputs = tf.matmul(inputs, tf.stop_gradient(weights))
        recording.record(self.weights, inputs, outputs)
        return outputs

    def _finish(self, outputs, training):
        if self.batch_norm is not None:
            outputs = self.batch_norm(outputs, training=training)
        elif self.biases is not None:
            outputs = tf.nn.bias_add(outputs, read(self.biases, outputs.dtype))
        outputs = self.activation(outputs) if self.activation else outputs
        # After batch norm and activation: TFLite fuses them into the int8 kernel.
        return self.act_quant(outputs, training=training) if self.act_quant else outputs


def _pad(inputs, padding, kernel_size, rate):
    """(inputs, padding) for the convolution: 'EXPLICIT' becomes slim's fixed padding
    (what SAME pads for the dilated kernel at stride 1, split begin/end) then 'VALID'."""
    if padding != 'EXPLICIT':
        return inputs, padding
    pads = []
    for k, r in zip(kernel_size, rate):
        total = k + (k - 1) * (r - 1) - 1
        pads.append((total // 2, total - total // 2))
    return tf.pad(inputs, [(0, 0), *pads, (0, 0)]), 'VALID'


class ConvND(WeightedLayer):
    """slim's conv2d/conv3d for any rank: SAME padding, ReLU, Xavier unless told otherwise.

    padding is 'SAME', 'VALID' or 'EXPLICIT': slim's fixed padding (ResNet's
    conv2d_same, MobileNet's use_explicit_padding), which pads as SAME would for a
    stride of 1, whatever the stride, and then convolves VALID.
    """

    rank = None  # set by the thin subclasses

    def __init__(self, name: str, num_outputs: int, kernel_size: IntTuple, *,
                 stride: IntTuple = 1, padding: str = 'SAME', rate: IntTuple = 1,
                 **options):
        super().__init__(name, **options)
        if padding not in ('SAME', 'VALID', 'EXPLICIT'):
            raise ValueError(f"padding must be 'SAME', 'VALID' or 'EXPLICIT', got {padding!r}.")
        self.num_outputs = num_outputs
        self.kernel_size = as_tuple(kernel_size, self.rank)
        self.stride = as_tuple(stride, self.rank)
        self.rate = as_tuple(rate, self.rank)
        self.padding = padding

    def forward(self, inputs, *, training: bool):
        if not self._built:
            self.weights = self._add_weights(
                'weights', [*self.kernel_size, inputs.shape[-1], self.num_outputs])
            self._add_biases(self.num_outputs)
            self._built = True
        inputs, padding = _pad(inputs, self.padding, self.kernel_size, self.rate)
        as_matmul = self._covers_input(inputs, padding)
        # Per tensor as a matmul: TFLite's converter takes no per-channel MatMul weights.
        weights = self._read_weights(self.weights, inputs.dtype, per_channel=not as_matmul)
        if as_matmul:
            # A fully connected layer written as a conv (VGG's fc6-8, the 1x1 logits
            # on a pooled map): one matmul. oneDNN's conv of a 1x1 output computes the
            # same sums several times slower, mostly in the filter gradient.
            flat = self._matmul(tf.reshape(inputs, [-1, math.prod(weights.shape[:-1])]),
                                tf.reshape(weights, [-1, self.num_outputs]))
            outputs = tf.reshape(flat, [-1, *[1] * self.rank, self.num_outputs])
        else:
            outputs = tf.nn.convolution(inputs, weights, strides=self.stride,
                                        padding=padding, dilations=self.rate)
        return self._finish(outputs, training)

    def _covers_input(self, inputs, padding):
        """Whether the kernel spans the whole (static) map, so the output is 1x1."""
        spatial = tuple(inputs.shape[1:-1])
        pointwise = all(k == 1 for k in self.kernel_size)
        return (spatial == self.kernel_size and all(r == 1 for r in self.rate)
                and (padding == 'VALID' or pointwise))


class Conv2D(ConvND):
    rank = 2


class Conv3D(ConvND):
    rank = 3


def conv2d_same(name: str, num_outputs: int, kernel_size: IntTuple, stride: int = 1,
                rate: int = 1, **options) -> Conv2D:
    """slim's resnet_utils.conv2d_same: SAME at stride 1, else explicit padding + VALID,
    so the output does not depend on the input's parity."""
    return Conv2D(name, num_outputs, kernel_size, stride=stride, rate=rate,
                  padding='SAME' if stride == 1 else 'EXPLICIT', **options)


class SeparableConv2D(WeightedLayer):
    """slim.separable_conv2d: depthwise, then pointwise unless num_outputs is None."""

    def __init__(self, name: str, num_outputs: Optional[int], kernel_size: IntTuple, *,
                 depth_multiplier: int = 1, stride: IntTuple = 1, padding: str = 'SAME',
                 rate: IntTuple = 1, **options):
        super().__init__(name, **options)
        self.num_outputs = num_outputs
        self.kernel_size = as_tuple(kernel_size, 2)
        self.depth_multiplier = depth_multiplier
        self.stride = as_tuple(stride, 2)
        self.padding = padding
        self.rate = as_tuple(rate, 2)
        self.pointwise_weights = None

    def forward(self, inputs, *, training: bool):
        in_depth = inputs.shape[-1]
        if not self._built:
            self.depthwise_weights = self._add_weights(
                'depthwise_weights', [*self.kernel_size, in_depth, self.depth_multiplier])
            if self.num_outputs is not None:
                self.pointwise_weights = self._add_weights(
                    'pointwise_weights',
                    [1, 1, in_depth * self.depth_multiplier, self.num_outputs])
            self._add_biases(self.num_outputs or in_depth * self.depth_multiplier)
            self._built = True
        inputs, padding = _pad(inputs, self.padding, self.kernel_size, self.rate)
        strides = (1, *self.stride, 1)
        # Per tensor: see nets.quantization.
        depthwise = self._read_weights(self.depthwise_weights, inputs.dtype,
                                       per_channel=False)
        if self.pointwise_weights is not None:
            outputs = tf.nn.separable_conv2d(
                inputs, depthwise, self._read_weights(self.pointwise_weights, inputs.dtype),
                strides=strides, padding=padding, dilations=self.rate)
        else:
            outputs = tf.nn.depthwise_conv2d(inputs, depthwise, strides=strides,
                                             padding=padding, dilations=self.rate)
        return self._finish(outputs, training)


class FullyConnected(WeightedLayer):
    """slim.fully_connected: a dense layer on the last axis."""

    def __init__(self, name: str, num_outputs: int, **options):
        super().__init__(name, **options)
        self.num_outputs = num_outputs

    def forward(self, inputs, *, training: bool):
        if not self._built:
            self.weights = self._add_weights('weights', [inputs.shape[-1], self.num_outputs])
            self._add_biases(self.num_outputs)
            self._built = True
        weights = self._read_weights(self.weights, inputs.dtype, per_channel=False)
        outputs = (self._matmul(inputs, weights) if inputs.shape.rank == 2
                   else tf.tensordot(inputs, weights, axes=1))
        return self._finish(outputs, training)


@contextlib.contextmanager
def recording_products(module: Module, recording):
    """Lends `recording` to the matmul layers of `module`'s tree while the context is
    open (one call of the net); None lends nothing."""
    if recording is None:
        yield
        return
    matmul_layers = [m for m in (module, *module.submodules) if isinstance(m, WeightedLayer)]
    if any(layer._product_recording is not None for layer in matmul_layers):
        raise RuntimeError(f'{module.relative_name!r} has a product recording already: one '
                           'call of the net at a time may record its products.')
    for layer in matmul_layers:
        layer._product_recording = recording  # pylint: disable=protected-access
    try:
        yield
    finally:
        for layer in matmul_layers:
            layer._product_recording = None  # pylint: disable=protected-access
