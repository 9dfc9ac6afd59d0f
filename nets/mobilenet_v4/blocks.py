"""MobileNetV4's blocks (Qin et al. 2024, "MobileNetV4: Universal Models for the Mobile
Ecosystem", arXiv 2404.10518), as timm's `mobilenetv4_*` build them for their weights.

The block table (nets/mobilenet_v4/mobilenet_v4.py) lists one spec per block:

- `ConvSpec`: a k x k convolution, batch norm, activation; no residual.
- `FusedSpec`: the fused inverted bottleneck: a k x k convolution expanding the input's
  depth `expansion` times (batch norm, activation), a linear 1x1 projection; residual
  where stride and depth allow.
- `UIBSpec`: the universal inverted bottleneck: an optional k x k depthwise ('start',
  batch norm, no activation), a 1x1 expansion (activation), an optional k x k depthwise
  ('middle', activation), a linear 1x1 projection. The kernels make it one of the
  paper's four: ExtraDW (start and middle), inverted bottleneck (middle only), ConvNeXt-
  like (start only) or FFN (neither). The stride is the middle depthwise's, else the
  start's.
- `MQASpec`: Mobile MQA: batch norm of the input, multi-query attention (`heads`
  queries of `key_depth`, one shared key and value of `key_depth`; keys and values
  first downsampled by a 3x3 stride-`kv_stride` depthwise conv and batch norm when
  `kv_stride` > 1), a 1x1 output projection; convs without biases or norms; residual.
  Queries keep the input's resolution (no variant strides them).

The hybrids scale each UIB's and MQA's branch by a learned per-channel layer scale
(initialised to 1e-5) before the residual add. Expanded depths are rounded to multiples
of 8 as timm's make_divisible. Stride-2 convs pad symmetrically (PyTorch's padding of
(k - 1) / 2, which is slim's explicit padding for odd kernels); stride 1 is SAME.
"""
import dataclasses
from typing import Callable, Dict, Optional

import tensorflow as tf

from nets import layers
from nets.efficientnet.blocks import round_filters


@dataclasses.dataclass(frozen=True)
class ConvSpec:
    kernel_size: int
    stride: int
    depth: int


@dataclasses.dataclass(frozen=True)
class FusedSpec:
    kernel_size: int
    stride: int
    expansion: float
    depth: int


@dataclasses.dataclass(frozen=True)
class UIBSpec:
    start_kernel: int  # 0: no start depthwise
    middle_kernel: int  # 0: no middle depthwise
    stride: int
    expansion: float
    depth: int


@dataclasses.dataclass(frozen=True)
class MQASpec:
    heads: int
    key_depth: int
    kv_stride: int
    depth: int


def _padding(stride: int) -> str:
    return 'SAME' if stride == 1 else 'EXPLICIT'


class ResidualBlock(layers.Module):
    """A block whose branch may be layer-scaled ('<block>/layer_scale', [depth]),
    dropped by drop-path in training, and added to its input where stride and depth
    allow. The net's drop-path schedule sets `drop_path_rate`."""

    drop_path_rate = 0.0

    def __init__(self, name: str, *, residual: bool,
                 layer_scale_init: Optional[float] = None):
        super().__init__(name)
        self.residual = residual
        self.layer_scale_init = layer_scale_init
        self.layer_scale = None

    def finish(self, inputs, branch, *, training: bool, random_generator=None):
        if self.layer_scale_init is not None:
            if self.layer_scale is None:
                self.layer_scale = self._add_variable(
                    'layer_scale', [branch.shape[-1]],
                    layers.constant_initializer(self.layer_scale_init))
            branch *= tf.cast(self.layer_scale, branch.dtype)
        if not self.residual:
            return branch
        return inputs + layers.stochastic_depth(branch, self.drop_path_rate,
                                                training=training,
                                                random_generator=random_generator)


class ConvBlock(ResidualBlock):
    """'conv': a k x k convolution with batch norm and the activation."""

    def __init__(self, name: str, spec: ConvSpec, *, activation: Callable, options: Dict):
        super().__init__(name, residual=False)
        self.conv = layers.Conv2D('conv', spec.depth, spec.kernel_size, stride=spec.stride,
                                  padding=_padding(spec.stride), activation=activation,
                                  **options)

    def forward(self, inputs, *, training: bool, random_generator=None):
        return self.conv(inputs, training=training)


class FusedInvertedBottleneck(ResidualBlock):
    """'expand' (k x k, activated), 'project' (1x1, linear)."""

    def __init__(self, name: str, spec: FusedSpec, *, input_depth: int,
                 activation: Callable, options: Dict):
        super().__init__(name, residual=spec.stride == 1 and input_depth == spec.depth)
        self.expand = layers.Conv2D(
            'expand', round_filters(input_depth * spec.expansion, 1.0), spec.kernel_size,
            stride=spec.stride, padding=_padding(spec.stride), activation=activation,
            **options)
        self.project = layers.Conv2D('project', spec.depth, 1, activation=None, **options)

    def forward(self, inputs, *, training: bool, random_generator=None):
        branch = self.project(self.expand(inputs, training=training), training=training)
        return self.finish(inputs, branch, training=training,
                           random_generator=random_generator)


class UniversalInvertedBottleneck(ResidualBlock):
    """'start_depthwise' (optional, linear), 'expand' (1x1), 'middle_depthwise'
    (optional), 'project' (1x1, linear), ['layer_scale']."""

    def __init__(self, name: str, spec: UIBSpec, *, input_depth: int,
                 activation: Callable, options: Dict,
                 layer_scale_init: Optional[float] = None):
        super().__init__(name, residual=spec.stride == 1 and input_depth == spec.depth,
                         layer_scale_init=layer_scale_init)
        self.start_depthwise = self.middle_depthwise = None
        if spec.start_kernel:
            stride = 1 if spec.middle_kernel else spec.stride
            self.start_depthwise = layers.SeparableConv2D(
                'start_depthwise', None, spec.start_kernel, stride=stride,
                padding=_padding(stride), activation=None, **options)
        self.expand = layers.Conv2D('expand', round_filters(input_depth * spec.expansion, 1.0),
                                    1, activation=activation, **options)
        if spec.middle_kernel:
            self.middle_depthwise = layers.SeparableConv2D(
                'middle_depthwise', None, spec.middle_kernel, stride=spec.stride,
                padding=_padding(spec.stride), activation=activation, **options)
        self.project = layers.Conv2D('project', spec.depth, 1, activation=None, **options)

    def forward(self, inputs, *, training: bool, random_generator=None):
        branch = inputs
        for layer in (self.start_depthwise, self.expand, self.middle_depthwise,
                      self.project):
            if layer is not None:
                branch = layer(branch, training=training)
        return self.finish(inputs, branch, training=training,
                           random_generator=random_generator)


class MobileMQA(ResidualBlock):
    """'input_norm' (batch norm), 'query', ['key_downsample'], 'key',
    ['value_downsample'], 'value', 'output' (1x1 convs without biases), ['layer_scale']."""

    def __init__(self, name: str, spec: MQASpec, *, input_depth: int,
                 batch_norm: layers.BatchNormParams, options: Dict,
                 layer_scale_init: Optional[float] = None):
        super().__init__(name, residual=input_depth == spec.depth,
                         layer_scale_init=layer_scale_init)
        self.heads, self.key_depth = spec.heads, spec.key_depth
        self.input_norm = layers.BatchNorm('input_norm', batch_norm)
        projection = {**options, 'normalizer': None, 'biases_initializer': None,
                      'activation': None}
        self.query = layers.Conv2D('query', spec.heads * spec.key_depth, 1, **projection)
        self.key_downsample = self.value_downsample = None
        if spec.kv_stride > 1:
            self.key_downsample, self.value_downsample = (
                layers.SeparableConv2D(f'{role}_downsample', None, 3, stride=spec.kv_stride,
                                       padding=_padding(spec.kv_stride), activation=None,
                                       **options)
                for role in ('key', 'value'))
        self.key = layers.Conv2D('key', spec.key_depth, 1, **projection)
        self.value = layers.Conv2D('value', spec.key_depth, 1, **projection)
        self.output = layers.Conv2D('output', spec.depth, 1, **projection)

    def _keys_or_values(self, downsample, projection, inputs, training):
        """[batch, positions, key_depth]: one key (or value) per downsampled position."""
        if downsample is not None:
            inputs = downsample(inputs, training=training)
        projected = projection(inputs, training=training)
        return tf.reshape(projected, [tf.shape(projected)[0], -1, self.key_depth])

    def forward(self, inputs, *, training: bool, random_generator=None):
        net = self.input_norm(inputs, training=training)
        shape = tf.shape(net)
        # [batch, positions * heads, key_depth]: each position's heads share the keys.
        queries = tf.reshape(self.query(net, training=training),
                             [shape[0], -1, self.key_depth])
        keys = self._keys_or_values(self.key_downsample, self.key, net, training)
        values = self._keys_or_values(self.value_downsample, self.value, net, training)
        scores = tf.matmul(queries * tf.cast(self.key_depth ** -0.5, queries.dtype), keys,
                           transpose_b=True)
        attended = tf.matmul(tf.nn.softmax(scores, axis=-1), values)
        attended = tf.reshape(attended, [shape[0], shape[1], shape[2],
                                         self.heads * self.key_depth])
        branch = self.output(attended, training=training)
        return self.finish(inputs, branch, training=training,
                           random_generator=random_generator)
