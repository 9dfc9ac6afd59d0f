"""The blocks of EfficientNet (Tan & Le, ICML 2019, arXiv 1905.11946) and EfficientNetV2
(Tan & Le, ICML 2021, arXiv 2104.00298), named as the official TensorFlow releases name
their checkpoints' variables (tensorflow/tpu `models/official/efficientnet`, google/automl
`efficientnetv2`).

`MBConv` is the mobile inverted bottleneck: a 1x1 expansion (skipped at expansion 1), a
k x k depthwise convolution, squeeze-and-excite, a linear 1x1 projection, and a residual
where neither the resolution nor the depth changes. `FusedMBConv` (V2's early stages)
replaces expansion and depthwise by one k x k convolution; at expansion 1 that
convolution is the whole block and keeps its activation.

Names inside a block 'blocks_<i>' follow tf.layers' and Keras's numbering by creation:
convolutions 'conv2d', 'conv2d_1'; batch norms 'tpu_batch_normalization', '..._1',
'..._2', each beside its convolution; 'depthwise_conv2d/depthwise_kernel';
'se/conv2d' and 'se/conv2d_1' with biases. Padding is SAME throughout, as the releases'.
"""
import dataclasses
import math
from typing import Callable, Dict, Optional

import tensorflow as tf

from nets import layers

BATCH_NORM_NAME = 'tpu_batch_normalization'  # the releases' name for every batch norm


@dataclasses.dataclass(frozen=True)
class Stage:
    """One row of a release's block table ('r1_k3_s1_e1_i32_o16_se0.25'): `repeats`
    blocks, the first with `stride` and `input_filters`, the rest stride 1 on
    `output_filters`."""
    repeats: int
    kernel_size: int
    stride: int
    expansion: int
    input_filters: int
    output_filters: int
    se_ratio: Optional[float] = None
    fused: bool = False


def round_filters(filters: float, width: float, divisor: int = 8,
                  keep_within_ten_percent: bool = True) -> int:
    """A depth scaled by `width`, rounded to the nearest multiple of `divisor` (at least
    `divisor`); EfficientNet (not V2) adds a divisor if rounding lost over 10 %."""
    scaled = filters * width
    rounded = max(divisor, int(scaled + divisor / 2) // divisor * divisor)
    if keep_within_ten_percent and rounded < 0.9 * scaled:
        rounded += divisor
    return int(rounded)


def round_repeats(repeats: int, depth: float) -> int:
    return int(math.ceil(depth * repeats))


def conv_kernel_initializer() -> layers.Initializer:
    """The releases' convolution initializer: a normal (not truncated) of stddev
    sqrt(2 / fan_out), fan_out = kernel height * width * output channels (for a
    depthwise kernel [k, k, C, 1], k * k)."""

    def initialize(shape, dtype):
        fan_out = shape[0] * shape[1] * shape[-1]
        return tf.random.normal(shape, stddev=math.sqrt(2.0 / fan_out), dtype=dtype)

    return initialize


def dense_kernel_initializer() -> layers.Initializer:
    """The releases' classifier initializer: uniform in +-1 / sqrt(classes)."""

    def initialize(shape, dtype):
        limit = 1.0 / math.sqrt(shape[1])
        return tf.random.uniform(shape, -limit, limit, dtype=dtype)

    return initialize


def _numbered(base: str):
    """base, base_1, base_2, ...: tf.layers' names for a block's layers of one kind."""
    yield base
    index = 1
    while True:
        yield f'{base}_{index}'
        index += 1


class SqueezeExcite(layers.Module):
    """'se': global average, a 1x1 conv to `reduced` with the block's activation, a 1x1
    conv back to `depth` whose sigmoid scales the input channels; both with biases."""

    def __init__(self, reduced: int, depth: int, *, activation: Callable, options: Dict):
        super().__init__('se')
        options = {**options, 'normalizer': None}
        self.reduce = layers.Conv2D('conv2d', reduced, 1, activation=activation, **options)
        self.expand = layers.Conv2D('conv2d_1', depth, 1, activation=tf.sigmoid, **options)

    def forward(self, inputs, *, training: bool):
        pooled = tf.reduce_mean(inputs, [1, 2], keepdims=True)
        return inputs * self.expand(self.reduce(pooled, training=training),
                                    training=training)


class MBConv(layers.Module):
    """One block 'blocks_<i>' of a stage; `forward` returns (output, expansion_output),
    the second the tensor before the projection (the releases' block end point).

    `options` are the kit options of its convolutions (batch norm, initializer, weight
    decay, quantization, naming); the squeeze-excite convs drop the batch norm. The net's
    drop-connect schedule sets `drop_path_rate`, applied to a residual block's branch in
    training.
    """

    drop_path_rate = 0.0

    def __init__(self, name: str, *, input_filters: int, output_filters: int,
                 expansion: int, kernel_size: int, stride: int, se_ratio: Optional[float],
                 fused: bool, activation: Callable, options: Dict):
        super().__init__(name)
        self.stride = stride
        conv_names, norm_names = _numbered('conv2d'), _numbered(BATCH_NORM_NAME)

        def conv(depth, kernel, stride=1, activation=activation):
            return layers.Conv2D(next(conv_names), depth, kernel, stride=stride,
                                 activation=activation, normalizer_name=next(norm_names),
                                 **options)

        expanded = input_filters * expansion
        self.expand = self.depthwise = self.squeeze_excite = None
        if expansion != 1:
            self.expand = (conv(expanded, kernel_size, stride) if fused
                           else conv(expanded, 1))
        if not fused:
            self.depthwise = layers.SeparableConv2D(
                'depthwise_conv2d', None, kernel_size, stride=stride, activation=activation,
                normalizer_name=next(norm_names), **options)
        if se_ratio is not None and 0 < se_ratio <= 1:
            self.squeeze_excite = SqueezeExcite(
                max(1, int(input_filters * se_ratio)), expanded, activation=activation,
                options=options)
        if fused and expansion == 1:  # the block's one convolution, activated
            self.project = conv(output_filters, kernel_size, stride)
        else:
            self.project = conv(output_filters, 1, activation=None)
        self.residual = stride == 1 and input_filters == output_filters

    def forward(self, inputs, *, training: bool, random_generator=None):
        net = inputs
        for layer in (self.expand, self.depthwise, self.squeeze_excite):
            if layer is not None:
                net = layer(net, training=training)
        expansion_output = net
        net = self.project(net, training=training)
        if self.residual:
            net = layers.stochastic_depth(net, self.drop_path_rate, training=training,
                                          random_generator=random_generator) + inputs
        return net, expansion_output
