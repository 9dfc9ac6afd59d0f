"""NASNet's and PNASNet's cells: described as data, and built from their description
(slim's NasNetABaseCell), with slim's drop-path (nets/layers/stateless.py, shared with
the residual nets). The network that runs them is in cell_network.py.

A cell (slim's NasNetABaseCell) turns its input and the output of an earlier cell into
`filters`-deep hidden states: state 0 is the input through ReLU, a 1x1 conv and batch
norm; state 1 is the earlier output, brought to the input's size and depth. Five
combinations follow, each adding two operations on earlier states and appending the sum.
The cell's output concatenates the states no combination was declared to use. An
operation is one of slim's names:
    'separable_KxK_N'   N times ReLU, KxK separable conv, batch norm (only the first strided)
    'avg_pool_KxK' | 'max_pool_KxK'   SAME pooling, then a 1x1 conv and batch norm if the
                        depth differs (no ReLU)
    'none'              identity, or ReLU, strided 1x1 conv and batch norm when the stride
                        or depth requires
Only operations on states 0 and 1 are strided. Drop-path follows every operation but
'none'.

What a cell contains (depth adapters, 1x1 convs after pools) depends on its inputs'
shapes, as in slim, so its layers are made on its first call.
"""
import dataclasses
import functools
import re
from typing import Optional, Tuple

import tensorflow as tf

from nets import layers
from nets.layers import drop_path
from nets.layers.fake_quant import Quantization


# --- Cells as data. ---

@dataclasses.dataclass(frozen=True)
class CellSpec:
    """A cell: five combinations of ((operation, state), (operation, state)) and the
    states that are concatenated into its output."""
    combinations: Tuple[Tuple[Tuple[str, int], Tuple[str, int]], ...]
    concatenated: Tuple[int, ...]


NASNET_A_NORMAL = CellSpec(
    combinations=(
        (('separable_5x5_2', 0), ('separable_3x3_2', 1)),
        (('separable_5x5_2', 1), ('separable_3x3_2', 1)),
        (('avg_pool_3x3', 0), ('none', 1)),
        (('avg_pool_3x3', 1), ('avg_pool_3x3', 1)),
        (('separable_3x3_2', 0), ('none', 0)),
    ),
    concatenated=(1, 2, 3, 4, 5, 6))
NASNET_A_REDUCTION = CellSpec(
    combinations=(
        (('separable_5x5_2', 0), ('separable_7x7_2', 1)),
        (('max_pool_3x3', 0), ('separable_7x7_2', 1)),
        (('avg_pool_3x3', 0), ('separable_5x5_2', 1)),
        (('none', 3), ('avg_pool_3x3', 2)),
        (('separable_3x3_2', 2), ('max_pool_3x3', 0)),
    ),
    concatenated=(3, 4, 5, 6))
PNASNET_5 = CellSpec(
    combinations=(
        (('separable_5x5_2', 1), ('max_pool_3x3', 1)),
        (('separable_7x7_2', 0), ('max_pool_3x3', 0)),
        (('separable_5x5_2', 0), ('separable_3x3_2', 0)),
        (('separable_3x3_2', 4), ('max_pool_3x3', 0)),
        (('separable_3x3_2', 1), ('none', 0)),
    ),
    concatenated=(2, 3, 4, 5, 6))


# --- Layers with slim's NASNet arg scope. ---

@dataclasses.dataclass(frozen=True)
class LayerOptions:
    """slim's nasnet_*_arg_scope, explicit: no activation or biases on convs, fan-out
    variance scaling, L2 on every weight, batch norm with gamma."""
    weight_decay: float
    batch_norm: layers.BatchNormParams
    quantization: Optional[Quantization] = None  # quantization-aware nets

    def _options(self):
        return dict(activation=None, biases_initializer=None, weight_decay=self.weight_decay,
                    weights_initializer=layers.variance_scaling_initializer(mode='FAN_OUT'),
                    quantization=self.quantization)

    def conv(self, name, depth, kernel, stride=1, padding='SAME'):
        return layers.Conv2D(name, depth, kernel, stride=stride, padding=padding,
                             **self._options())

    def separable(self, name, depth, kernel, stride=1):
        return layers.SeparableConv2D(name, depth, kernel, stride=stride, **self._options())

    def bn(self, name):
        return layers.BatchNorm(name, self.batch_norm)

    def fully_connected(self, name, num_outputs):
        return layers.FullyConnected(
            name, num_outputs, activation=None, weight_decay=self.weight_decay,
            weights_initializer=layers.variance_scaling_initializer(mode='FAN_OUT'),
            quantization=self.quantization)


def apply_all(layer_list, inputs, training):
    """The layers applied in order (modules with `training`, functions without)."""
    for layer in layer_list:
        inputs = layers.apply(layer, inputs, training=training)
    return inputs


class FactorizedReduction(layers.Module):
    """slim's factorized_reduction: a 1x1 conv at stride 1; at stride 2, two 1x1 convs on
    the input subsampled at even and at odd offsets, concatenated (the second takes the
    odd filter), then batch norm."""

    def __init__(self, name: str, filters: int, stride: int, options: LayerOptions):
        super().__init__(name)
        self.stride = stride
        if stride == 1:
            self.path_layers = [options.conv('path_conv', filters, 1), options.bn('path_bn')]
        else:
            self.path1 = options.conv('path1_conv', filters // 2, 1)
            self.path2 = options.conv('path2_conv', filters // 2 + filters % 2, 1)
            self.final_bn = options.bn('final_path_bn')

    def forward(self, inputs, *, training):
        if self.stride == 1:
            return apply_all(self.path_layers, inputs, training)
        s = self.stride
        path1 = self.path1(inputs[:, ::s, ::s, :], training=training)
        # The second path starts one pixel on, padded with zeros at the bottom right.
        shifted = tf.pad(inputs, [[0, 0], [0, 1], [0, 1], [0, 0]])[:, 1:, 1:, :]
        path2 = self.path2(shifted[:, ::s, ::s, :], training=training)
        return self.final_bn(tf.concat([path1, path2], -1), training=training)


_SEPARABLE = re.compile(r'separable_(\d+)x\1_(\d+)$')
_POOL = re.compile(r'(avg|max)_pool_(\d+)x\2$')


class Operation(layers.Module):
    """One operation of a combination, by slim's name (see the module docstring)."""

    def __init__(self, name: str, operation: str, *, filters: int, input_filters: int,
                 stride: int, options: LayerOptions):
        super().__init__(name)
        self.drops_path = operation != 'none'
        separable, pool = _SEPARABLE.match(operation), _POOL.match(operation)
        if separable:
            kernel, repeats = int(separable.group(1)), int(separable.group(2))
            self.layers = []
            for i in range(1, repeats + 1):
                self.layers += [tf.nn.relu,
                                options.separable(f'separable_{kernel}x{kernel}_{i}', filters,
                                                  kernel, stride if i == 1 else 1),
                                options.bn(f'bn_sep_{kernel}x{kernel}_{i}')]
        elif pool:
            pool_fn = layers.avg_pool if pool.group(1) == 'avg' else layers.max_pool
            kernel = int(pool.group(2))
            self.layers = [functools.partial(pool_fn, kernel_size=kernel, stride=stride,
                                             padding='SAME')]
            if input_filters != filters:
                self.layers += [options.conv('1x1', filters, 1), options.bn('bn_1')]
        elif operation == 'none':
            self.layers = []
            if stride > 1 or input_filters != filters:
                self.layers = [tf.nn.relu, options.conv('1x1', filters, 1, stride),
                               options.bn('bn_1')]
        else:
            raise ValueError(f'Unknown cell operation {operation!r}.')

    def forward(self, inputs, *, training, keep_prob=None, random_generator=None):
        outputs = apply_all(self.layers, inputs, training)
        if self.drops_path and keep_prob is not None:
            outputs = drop_path(outputs, keep_prob, random_generator)
        return outputs


class Cell(layers.Module):
    """A NASNet-A or PNASNet-5 cell from its CellSpec (slim's NasNetABaseCell)."""

    def __init__(self, name: str, spec: CellSpec, *, filters: int, stride: int,
                 options: LayerOptions):
        super().__init__(name)
        self.spec = spec
        self.filters = filters
        self.stride = stride
        self.options = options
        self.base = [tf.nn.relu, options.conv('1x1', filters, 1), options.bn('beginning_bn')]
        self.prev_adapter = None
        self.operations = {}  # 'comb_iter_<i>/<left|right>' -> Operation
        # str(state index) -> FactorizedReduction (string keys: checkpoints need them)
        self.output_reductions = {}
        self._built = False

    def _adopt(self, module):
        module.resolve_scopes(self.scope)
        return module

    def _build_prev_adapter(self, inputs, prev):
        """Brings the earlier cell's output to this cell's input size and depth."""
        if prev.shape[2] != inputs.shape[2]:
            return [tf.nn.relu, self._adopt(
                FactorizedReduction('', self.filters, 2, self.options))]
        if prev.shape[-1] != self.filters:
            return [tf.nn.relu, self._adopt(self.options.conv('prev_1x1', self.filters, 1)),
                    self._adopt(self.options.bn('prev_bn'))]
        return []

    def forward(self, inputs, prev, *, training, keep_prob=None, random_generator=None):
        """keep_prob: drop-path's, None for none (its masks from `random_generator`)."""
        # Op names under the cell's scope; layers made here get a valid parent scope.
        with tf.name_scope(self.name):
            return self._forward(inputs, prev, training=training, keep_prob=keep_prob,
                                 random_generator=random_generator)

    def _forward(self, inputs, prev, *, training, keep_prob, random_generator):
        if prev is None:  # the first cell of a net without stem cells: its input
            prev = inputs
        elif not self._built:
            self.prev_adapter = self._build_prev_adapter(inputs, prev)
        prev = apply_all(self.prev_adapter or [], prev, training)
        states = [apply_all(self.base, inputs, training), prev]
        for i, combination in enumerate(self.spec.combinations):
            outputs = []
            for side, (operation, state) in zip(('left', 'right'), combination):
                key = f'comb_iter_{i}/{side}'
                if not self._built:
                    self.operations[key] = self._adopt(Operation(
                        key, operation, filters=self.filters,
                        input_filters=states[state].shape[-1],
                        stride=self.stride if state < 2 else 1, options=self.options))
                outputs.append(self.operations[key](states[state], training=training,
                                                    keep_prob=keep_prob,
                                                    random_generator=random_generator))
            states.append(outputs[0] + outputs[1])
        if not self._built:
            self._build_output_reductions(states)
            self._built = True
        for index, reduction in self.output_reductions.items():
            states[int(index)] = reduction(states[int(index)], training=training)
        return tf.concat([states[i] for i in self.spec.concatenated], -1)

    def _build_output_reductions(self, states):
        """States to concatenate that differ from the last one in size or depth."""
        final = states[-1].shape
        for index in self.spec.concatenated:
            shape = states[index].shape
            if shape[2] != final[2] or shape[-1] != final[-1]:
                self.output_reductions[str(index)] = self._adopt(FactorizedReduction(
                    f'cell_output/reduction_{index}', final[-1],
                    2 if shape[2] != final[2] else 1, self.options))
