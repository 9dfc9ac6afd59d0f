"""What the Inception family shares: slim's inception_arg_scope batch norm, branches
described as data, and the small-input kernel reduction.

A branch is a list of layer specs, applied in order:
    ('conv', name, depth, kernel[, stride, padding])
    ('avg' | 'max', name, kernel, stride, padding)
    ('fork', [(name, depth, kernel), ...])   parallel convs on one input, concatenated
A block (`Mixed`) runs its branches on one input and concatenates them on channels. A
net turns a spec into a layer with `build_layer(spec, conv, default_padding)`, where
`conv(name, depth, kernel, stride, padding)` makes its own conv (depth multiplier,
batch norm, initialiser).
"""
from typing import Callable

import tensorflow as tf

from nets import layers
from nets.network import EndPoints

# slim's inception_arg_scope: batch norm decay 0.9997, epsilon 0.001, no gamma.
BATCH_NORM = layers.BatchNormParams(decay=0.9997, epsilon=0.001, center=True, scale=False)


def reduced_kernel_size(inputs, kernel_size):
    """slim's _reduced_kernel_size_for_small_input: the kernel, capped by the map."""
    height, width = inputs.shape[1:3]
    if height is None or width is None:
        return list(kernel_size)
    return [min(height, kernel_size[0]), min(width, kernel_size[1])]


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
        net = apply(layer, net, training=training)
        if end_points.add(name, net):
            return net, end_points
    raise end_points.unknown_final_endpoint()


def apply(layer, inputs, *, training):
    """Calls a module with `training`, a plain callable (pool) without."""
    return layer(inputs, training=training) if isinstance(layer, layers.Module) \
        else layer(inputs)


def whole_map_average(net):
    """slim's final pooling in v4 and Inception-ResNet-v2: an average over the whole
    feature map, a mean when its size is unknown. [batch, 1, 1, depth]."""
    kernel = net.shape[1:3]
    if kernel.is_fully_defined():
        return layers.avg_pool(net, kernel.as_list(), 2, 'VALID')
    return tf.reduce_mean(net, [1, 2], keepdims=True, name='global_pool')


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
