"""What the Inception family shares: slim's inception_arg_scope batch norm, branches
described as data, the stem of v3 and Inception-ResNet-v2, the auxiliary head of v4
and Inception-ResNet-v2, and the skeleton of v1 and v2 (`StemAndBlocksNet`).

A branch is a list of layer specs, applied in order:
    ('conv', name, depth, kernel[, stride, padding])
    ('avg' | 'max', name, kernel, stride, padding)
    ('fork', [(name, depth, kernel), ...])   parallel convs on one input, concatenated
A block (`Mixed`) runs its branches on one input and concatenates them on channels. A
net turns a spec into a layer with `build_layer(spec, conv, default_padding)`, where
`conv(name, depth, kernel, stride, padding)` makes its own conv (depth multiplier,
batch norm, initialiser, quantization).
"""
from typing import Callable

import tensorflow as tf

from nets import heads, layers
from nets.network import EndPoints, Network

# slim's inception_arg_scope: batch norm decay 0.9997, epsilon 0.001, no gamma.
BATCH_NORM = layers.BatchNormParams(decay=0.9997, epsilon=0.001, center=True, scale=False)

# Inception v3's stem, which Inception-ResNet-v2 reuses (names and depths alike).
STEM_299 = [
    ('conv', 'Conv2d_1a_3x3', 32, 3, 2, 'VALID'),
    ('conv', 'Conv2d_2a_3x3', 32, 3, 1, 'VALID'),
    ('conv', 'Conv2d_2b_3x3', 64, 3, 1, 'SAME'),
    ('max', 'MaxPool_3a_3x3', 3, 2, 'VALID'),
    ('conv', 'Conv2d_3b_1x1', 80, 1, 1, 'VALID'),
    ('conv', 'Conv2d_4a_3x3', 192, 3, 1, 'VALID'),
    ('max', 'MaxPool_5a_3x3', 3, 2, 'VALID'),
]


class Pool:
    """A pooling layer as a callable of the tensor alone (no variables, no training)."""

    def __init__(self, pool, kernel, stride, padding):
        self.pool, self.kernel, self.stride, self.padding = pool, kernel, stride, padding

    def __call__(self, inputs):
        return self.pool(inputs, self.kernel, self.stride, self.padding)


class Fork(layers.Module):
    """Parallel convs on one input, concatenated on channels (no scope of its own)."""

    def __init__(self, convs, axis=-1):
        super().__init__('')
        self.convs = convs
        self.axis = axis

    def forward(self, inputs, *, training):
        return tf.concat([conv(inputs, training=training) for conv in self.convs], self.axis)


class Mixed(layers.Module):
    """An Inception block: its branches on one input, concatenated on channels."""

    def __init__(self, name, branches, axis=-1):
        super().__init__(name)
        self.branches = branches
        self.axis = axis

    def forward(self, inputs, *, training):
        return tf.concat([branch(inputs, training=training) for branch in self.branches],
                         self.axis)


def build_layer(spec, conv: Callable, default_padding: str = 'SAME'):
    """One layer from its spec (see the module docstring)."""
    kind = spec[0]
    if kind == 'conv':
        _, name, depth, kernel, *rest = spec
        stride, padding = rest if rest else (1, default_padding)
        return conv(name, depth, kernel, stride, padding)
    if kind == 'fork':
        return Fork([conv(name, depth, kernel, 1, 'SAME') for name, depth, kernel in spec[1]])
    if kind in ('avg', 'max'):
        _, _, kernel, stride, padding = spec
        return Pool(layers.avg_pool if kind == 'avg' else layers.max_pool, kernel, stride,
                    padding)
    raise ValueError(f'Unknown layer kind {kind!r} in {spec!r}.')


def build_mixed(name, branches, conv: Callable, default_padding: str = 'SAME') -> Mixed:
    """A block from its branch descriptions: Branch_0, Branch_1, ... in order."""
    return Mixed(name, [
        layers.Sequential(f'Branch_{i}', [build_layer(spec, conv, default_padding)
                                          for spec in branch])
        for i, branch in enumerate(branches)])


def forward_through(end_point_layers, inputs, *, final_endpoint, training):
    """Applies (end point, layer) pairs in order, recording each output, up to
    `final_endpoint`: a net's `forward_base`. Returns (features, EndPoints)."""
    end_points = EndPoints(final_endpoint)
    net = inputs
    for name, layer in end_point_layers:
        net = layers.apply(layer, net, training=training)
        if end_points.add(name, net):
            return net, end_points
    raise end_points.unknown_final_endpoint()


class AuxHead(layers.Module):
    """The auxiliary classifier 'AuxLogits': a 5x5/3 average pool, a 1x1 conv, a VALID
    conv spanning the whole pooled map, flatten, a fully connected layer.

    The spanning conv's kernel is known only from the first input, so it is made then;
    a later input of another size fails, as reusing slim's variables would.
    """

    def __init__(self, conv, *, conv_name: str, logits: layers.FullyConnected):
        super().__init__('AuxLogits')
        self._conv = conv
        self._conv_name = conv_name
        self.conv_1b = conv('Conv2d_1b_1x1', 128, 1)
        self.conv_2a = None
        self.logits = logits

    def forward(self, inputs, *, training):
        net = layers.avg_pool(inputs, 5, 3, 'VALID')
        net = self.conv_1b(net, training=training)
        kernel = net.shape[1:3]
        if not kernel.is_fully_defined():
            raise ValueError('The auxiliary head needs a known input height and width; '
                             'use create_aux_logits=False for inputs of unknown size.')
        if self.conv_2a is None:
            self.conv_2a = self._conv(self._conv_name, 768, kernel.as_list(), 1, 'VALID')
            self.conv_2a.resolve_scopes(self.scope)
        elif list(self.conv_2a.kernel_size) != kernel.as_list():
            raise ValueError(f'The auxiliary head was built for a {self.conv_2a.kernel_size} '
                             f'map, got {kernel.as_list()}: a net takes one input size.')
        net = layers.flatten(self.conv_2a(net, training=training))
        return self.logits(net, training=training)


class StemAndBlocksNet(Network):
    """Inception v1 and v2: layers in a row, each an end point (the root block, which
    `include_root_block=False` leaves out, then blocks), then a pool and slim's conv
    classifier (nets/heads.py) under 'Logits'. A subclass fills `self.end_point_layers`
    and implements `_pool(features) -> (end point name, pooled)`."""

    default_final_endpoint = 'Mixed_5c'
    pre_logits_endpoint = False  # v2 records the dropout's output as 'PreLogits'

    def __init__(self, num_classes, *, scope, is_training, weight_decay, dropout_keep_prob,
                 spatial_squeeze, global_pool, logits_name, spec, quantization):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        self.weight_decay = weight_decay
        self.dropout_keep_prob = dropout_keep_prob
        self.spatial_squeeze = spatial_squeeze
        self.global_pool = global_pool
        self.end_point_layers = []  # (end point, layer), filled by the subclass
        self.logits = None
        if num_classes:
            self.logits = layers.Conv2D(
                logits_name, num_classes, 1, activation=None,
                weights_initializer=layers.variance_scaling_initializer(),
                weight_decay=weight_decay, quantization=self.quantization)

    def _pool(self, features):
        raise NotImplementedError

    def forward_base(self, images, *, final_endpoint, training):
        return forward_through(self.end_point_layers, images, final_endpoint=final_endpoint,
                               training=training)

    def forward(self, images, *, training, random_generator=None):
        net, end_points = self.forward_base(images, final_endpoint='Mixed_5c',
                                            training=training)
        output = heads.conv_classifier(
            net, self.logits, end_points, pool=self._final_pool,
            dropout_keep_prob=self.dropout_keep_prob, training=training,
            random_generator=random_generator, spatial_squeeze=self.spatial_squeeze,
            pre_logits=self.pre_logits_endpoint)
        return output, end_points

    def _final_pool(self, features):
        if self.global_pool:
            return 'global_pool', tf.reduce_mean(features, [1, 2], keepdims=True,
                                                 name='global_pool')
        return self._pool(features)
