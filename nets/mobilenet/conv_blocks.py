"""The blocks of MobileNet V2/V3 as TF-Slim's `nets/mobilenet/conv_blocks.py` builds them.

`ExpandedConv` is the inverted residual of MobileNetV2 (Sandler et al., 2018): a 1x1
expansion, a depthwise convolution, optionally squeeze-and-excite (MobileNetV3, Howard et
al., 2019), a linear 1x1 projection and a residual. Its "fused" form (MobileNet-EdgeTPU)
replaces expansion and depthwise by one full k x k convolution.

slim's quirks reproduced: the expansion is skipped when it would not widen the input (so
V2's first block has no 'expand' layer and no 'expansion_output'); the squeeze depth is
rounded with `make_divisible`; the hard-sigmoid gate multiplies by 0.16667, not 1/6.
"""
from typing import Callable, Dict, Optional

import tensorflow as tf

from nets import layers


def make_divisible(value: float, divisor: int, min_value: Optional[int] = None) -> int:
    """slim's `_make_divisible`: `value` rounded to the nearest multiple of `divisor`, at
    least `min_value` (default `divisor`), and bumped up if rounding lost over 10 %."""
    min_value = divisor if min_value is None else min_value
    rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:
        rounded += divisor
    return int(rounded)


def hard_swish(x):
    """x * relu6(x + 3) / 6, MobileNetV3's cheap swish."""
    return x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0)


def hard_sigmoid(x):
    """The squeeze-excite gate: relu6(x + 3) / 6, with slim's constant 0.16667."""
    return tf.nn.relu6(x + 3.0) * 0.16667


class SqueezeExcite(layers.Module):
    """Global average, a 1x1 ReLU squeeze to depth / factor (rounded to a multiple of
    `divisible_by`), a 1x1 hard-sigmoid excite back to depth; scales the input channels.
    Both convolutions have biases and no batch norm (scope 'squeeze_excite/Conv[_1]')."""

    def __init__(self, depth: int, *, weights_initializer, weight_decay: float,
                 squeeze_factor: int = 4, divisible_by: int = 8, quantization=None):
        super().__init__('squeeze_excite')
        common = dict(weights_initializer=weights_initializer, weight_decay=weight_decay,
                      normalizer=None, quantization=quantization)
        self.squeeze = layers.Conv2D('Conv', make_divisible(depth / squeeze_factor,
                                                            divisible_by),
                                     1, activation=tf.nn.relu, **common)
        self.excite = layers.Conv2D('Conv_1', depth, 1, activation=hard_sigmoid, **common)

    def forward(self, inputs, *, training: bool):
        pooled = tf.reduce_mean(inputs, [1, 2], keepdims=True)
        gate = self.excite(self.squeeze(pooled, training=training), training=training)
        return inputs * gate


class ExpandedConv(layers.Module):
    """slim's `expanded_conv`: returns `(output, end_points)` with the block's own end
    points 'expansion_output' (only if it expands), 'depthwise_output' (only if not
    fused) and 'output'.

    `conv_options` are the kit options of a batch-normalised 1x1 conv (initializer, weight
    decay, normalizer, quantization); the depthwise layer takes them without weight
    decay, as slim's training scope regularises conv2d only. `activation` is used by the
    expansion and the depthwise layer; the projection is linear. A block with a
    residual drops its projection per example, in training, with probability
    `drop_path_rate` (set by the net's drop-path schedule) before the add.
    """

    drop_path_rate = 0.0

    def __init__(self, name: str, *, input_depth: int, expansion_depth: int,
                 num_outputs: int, kernel_size: int, stride: int, rate: int,
                 activation: Callable, conv_options: Dict, padding: str = 'SAME',
                 fused: bool = False, squeeze_excite: bool = False, residual: bool = True):
        super().__init__(name)
        self.num_outputs = num_outputs
        expands = expansion_depth > input_depth
        # A fused block convolves only in its expansion: when it does not widen the
        # input, slim applies no spatial convolution at all (EdgeTPU's layer_2).
        self.expand = None
        if expands:
            self.expand = layers.Conv2D(
                'expand', expansion_depth, kernel_size if fused else 1,
                stride=stride if fused else 1, rate=rate if fused else 1,
                padding=padding, activation=activation, **conv_options)
        inner_depth = expansion_depth if expands else input_depth
        self.depthwise = None
        if not fused:
            self.depthwise = layers.SeparableConv2D(
                'depthwise', None, kernel_size, stride=stride, rate=rate, padding=padding,
                activation=activation, **{**conv_options, 'weight_decay': 0.0})
        self.squeeze_excite = None
        if squeeze_excite:
            self.squeeze_excite = SqueezeExcite(
                inner_depth, weights_initializer=conv_options['weights_initializer'],
                weight_decay=conv_options['weight_decay'],
                quantization=conv_options.get('quantization'))
        self.project = layers.Conv2D('project', num_outputs, 1, activation=None,
                                     **conv_options)
        # As slim: a residual only where neither the resolution nor the depth changes.
        self.residual = residual and stride == 1 and num_outputs == input_depth

    def forward(self, inputs, *, training: bool, random_generator=None):
        end_points = {}
        net = inputs
        if self.expand is not None:
            net = end_points['expansion_output'] = self.expand(net, training=training)
        if self.depthwise is not None:
            net = end_points['depthwise_output'] = self.depthwise(net, training=training)
        if self.squeeze_excite is not None:
            net = self.squeeze_excite(net, training=training)
        net = self.project(net, training=training)
        if self.residual:
            net = layers.stochastic_depth(net, self.drop_path_rate, training=training,
                                          random_generator=random_generator) + inputs
        end_points['output'] = net
        return net, end_points
