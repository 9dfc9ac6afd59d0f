"""What NASNet and PNASNet share: cells described as data, one cell builder, the stems'
pieces, drop-path with TF-Slim's schedule, the auxiliary head and the network body that
runs a plan of cells.

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
from typing import List, Optional, Sequence, Tuple

import tensorflow as tf

from nets import layers
from nets.network import EndPoints, Network


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


@dataclasses.dataclass(frozen=True)
class Config:
    """slim's NASNet/PNASNet hyper-parameters (its HParams configs), NHWC only."""
    stem_multiplier: float
    num_cells: int
    num_conv_filters: int
    dense_dropout_keep_prob: float
    drop_path_keep_prob: float
    use_aux_head: bool
    skip_reduction_layer_input: bool
    total_training_steps: int
    filter_scaling_rate: float = 2.0
    num_reduction_layers: int = 2

    def __post_init__(self):
        for name in ('dense_dropout_keep_prob', 'drop_path_keep_prob'):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f'{name} must be in (0, 1], got {getattr(self, name)}.')
        for name in ('num_cells', 'num_conv_filters', 'total_training_steps'):
            if getattr(self, name) < 1:
                raise ValueError(f'{name} must be at least 1, got {getattr(self, name)}.')
        if self.stem_multiplier <= 0 or self.filter_scaling_rate <= 0:
            raise ValueError('stem_multiplier and filter_scaling_rate must be positive.')
        if self.num_reduction_layers < 0:
            raise ValueError('num_reduction_layers must not be negative.')

    def reduction_indices(self) -> List[int]:
        """slim's calc_reduction_layers: the cells that reduce, evenly spaced."""
        n = self.num_reduction_layers
        return [int(k / (n + 1) * self.num_cells) for k in range(1, n + 1)]


def configure(config: Config, options: dict) -> Tuple[Config, Optional[float]]:
    """(config with the options naming its fields replaced, as slim's set_hparam, and the
    `dropout_keep_prob` option: the zoo's name for dense_dropout_keep_prob)."""
    fields = {f.name for f in dataclasses.fields(Config)}
    unknown = set(options) - fields - {'dropout_keep_prob'}
    if unknown:
        raise TypeError(f'Unknown option(s) {sorted(unknown)}; this net takes '
                        f'dropout_keep_prob and {", ".join(sorted(fields))}.')
    overrides = {k: v for k, v in options.items() if k in fields}
    return dataclasses.replace(config, **overrides), options.get('dropout_keep_prob')


@dataclasses.dataclass(frozen=True)
class CellPlacement:
    """One cell of a net: its scope, end point, kind and inputs.

    `prev_state` indexes the hidden states of the net so far (0 is 'none', 1 the stem's
    first output, then one per cell); its position in the plan is its depth for
    drop-path.
    """
    scope: str
    end_point: Optional[str]
    spec: CellSpec
    filter_scaling: float
    stride: int
    prev_state: int
    aux_head: Optional[str] = None  # the scope of an auxiliary head on this cell's output


# --- Drop-path. ---

def drop_path_keep_prob(keep_prob: float, depth: int, num_cells: int, step=None,
                        total_training_steps: int = 1):
    """slim's schedule (drop_connect_version 'v3'): the drop rate grows linearly with
    the cell's depth, (depth + 1) / num_cells, and with training progress,
    min(1, step / total_training_steps). Without a step, the depth term alone (slim's 'v2').
    """
    keep = 1.0 - (depth + 1) / num_cells * (1.0 - keep_prob)
    if step is None:
        return keep
    progress = tf.minimum(1.0, tf.cast(step, tf.float32) / float(total_training_steps))
    return 1.0 - progress * (1.0 - keep)


def drop_path(inputs, keep_prob):
    """Zeroes whole examples with probability 1 - keep_prob, scales the rest by 1 / keep_prob
    (slim's drop_path; the mask is drawn in float32 whatever the input's dtype)."""
    keep_prob = tf.cast(keep_prob, tf.float32)
    noise_shape = [tf.shape(inputs)[0]] + [1] * (inputs.shape.rank - 1)
    mask = tf.floor(keep_prob + tf.random.uniform(noise_shape, dtype=tf.float32))
    return inputs * tf.cast(mask / keep_prob, inputs.dtype)


# --- Layers with slim's NASNet arg scope. ---

@dataclasses.dataclass(frozen=True)
class LayerOptions:
    """slim's nasnet_*_arg_scope, explicit: no activation or biases on convs, fan-out
    variance scaling, L2 on every weight, batch norm with gamma."""
    weight_decay: float
    batch_norm: layers.BatchNormParams

    def _options(self):
        return dict(activation=None, biases_initializer=None, weight_decay=self.weight_decay,
                    weights_initializer=layers.variance_scaling_initializer(mode='FAN_OUT'))

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
            weights_initializer=layers.variance_scaling_initializer(mode='FAN_OUT'))


def _apply(layer_list, inputs, training):
    for layer in layer_list:
        inputs = layer(inputs, training=training) if isinstance(layer, layers.Module) \
            else layer(inputs)
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
            return _apply(self.path_layers, inputs, training)
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

    def forward(self, inputs, *, training, keep_prob=None):
        outputs = _apply(self.layers, inputs, training)
        if self.drops_path and keep_prob is not None:
            outputs = drop_path(outputs, keep_prob)
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

    def forward(self, inputs, prev, *, training, keep_prob=None):
        # Op names under the cell's scope; layers made here get a valid parent scope.
        with tf.name_scope(self.name):
            return self._forward(inputs, prev, training=training, keep_prob=keep_prob)

    def _forward(self, inputs, prev, *, training, keep_prob):
        if prev is None:  # the first cell of a net without stem cells: its input
            prev = inputs
        elif not self._built:
            self.prev_adapter = self._build_prev_adapter(inputs, prev)
        prev = _apply(self.prev_adapter or [], prev, training)
        states = [_apply(self.base, inputs, training), prev]
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
                                                    keep_prob=keep_prob))
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


class AuxHead(layers.Module):
    """slim's _build_aux_head: 5x5/3 average pool, 1x1 conv to 128, a conv over the whole
    remaining map to 768 (slim's default name 'Conv'), each with batch norm and ReLU,
    then the fully connected classifier."""

    def __init__(self, name: str, num_classes: int, options: LayerOptions):
        super().__init__(name)
        self.options = options
        self.proj = [options.conv('aux_logits/proj', 128, 1), options.bn('aux_logits/aux_bn0'),
                     tf.nn.relu]
        self.conv = None  # its kernel is the feature map's size
        self.conv_bn = options.bn('aux_logits/aux_bn1')
        self.fc = options.fully_connected('aux_logits/FC', num_classes)

    def forward(self, inputs, *, training):
        net = layers.avg_pool(inputs, 5, 3, 'VALID')
        net = _apply(self.proj, net, training)
        if not net.shape[1:3].is_fully_defined() or min(net.shape[1:3]) < 1:
            raise ValueError(f'The auxiliary head needs a larger, known input size: its '
                             f'pooled map would be {net.shape[1:3]}; use a larger image '
                             f'(or build the net for inference).')
        if self.conv is None:
            self.conv = self.options.conv('aux_logits/Conv', 768, net.shape[1:3],
                                          padding='VALID')
            self.conv.resolve_scopes(self.scope)
        net = tf.nn.relu(self.conv_bn(self.conv(net, training=training), training=training))
        return self.fc(layers.flatten(net), training=training)


# --- The network body. ---

class CellNetwork(Network):
    """A stem, then cells by plan, global average pooling and a fully connected
    classifier; the auxiliary head on one cell in nets built for training.

    Variables have no outer scope ('cell_0/...', 'final_layer/FC/weights'), as in slim.
    `net(images, training=True, step=global_step)` schedules drop-path by the step.
    """

    uses_step = True

    def __init__(self, *, num_classes: int, is_training: bool, config: Config,
                 options: LayerOptions, stem: str, plan: Sequence[CellPlacement],
                 dropout_keep_prob: Optional[float] = None):
        super().__init__(scope='', num_classes=num_classes, is_training=is_training)
        self.config = config
        self.dropout_keep_prob = (config.dense_dropout_keep_prob if dropout_keep_prob is None
                                  else dropout_keep_prob)
        if not 0.0 < self.dropout_keep_prob <= 1.0:
            raise ValueError(f'dropout_keep_prob must be in (0, 1], got '
                             f'{self.dropout_keep_prob}.')
        self.plan = list(plan)
        self.default_final_endpoint = [p.end_point for p in plan if p.end_point][-1]
        if stem == 'cifar':
            self.stem = [options.conv('l1_stem_3x3',
                                      int(config.num_conv_filters * config.stem_multiplier), 3),
                         options.bn('l1_stem_bn')]
        elif stem == 'imagenet':
            self.stem = [options.conv('conv0', int(32 * config.stem_multiplier), 3, 2, 'VALID'),
                         options.bn('conv0_bn')]
        else:
            raise ValueError(f"stem must be 'cifar' or 'imagenet', got {stem!r}.")
        self.stem_type = stem
        self.cells = [Cell(p.scope, p.spec, stride=p.stride, options=options,
                           filters=int(config.num_conv_filters * p.filter_scaling))
                      for p in plan]
        # slim builds the auxiliary head only in a training graph.
        aux_scopes = [p.aux_head for p in plan if p.aux_head]
        self.aux_head = (AuxHead(aux_scopes[0], num_classes, options)
                         if config.use_aux_head and num_classes and is_training and aux_scopes
                         else None)
        self.logits = (options.fully_connected('final_layer/FC', num_classes)
                       if num_classes else None)

    def _keep_prob(self, depth, training, step):
        if not training or self.config.drop_path_keep_prob >= 1.0:
            return None
        return drop_path_keep_prob(self.config.drop_path_keep_prob, depth, len(self.plan),
                                   step, self.config.total_training_steps)

    # Plain Python building a graph: converting it with AutoGraph only slows tracing
    # (by about 10x for these ~1000-layer nets).
    @tf.autograph.experimental.do_not_convert
    def forward_base(self, images, *, final_endpoint, training, step=None):
        end_points = EndPoints(final_endpoint)
        net = _apply(self.stem, images, training)
        if self.stem_type == 'cifar' and end_points.add('Stem', net):
            return net, end_points
        states = [None, net]
        for depth, (placement, cell) in enumerate(zip(self.plan, self.cells)):
            net = cell(net, states[placement.prev_state], training=training,
                       keep_prob=self._keep_prob(depth, training, step))
            states.append(net)
            if placement.end_point and end_points.add(placement.end_point, net):
                return net, end_points
            if placement.aux_head and self.aux_head is not None:
                end_points['AuxLogits'] = self.aux_head(tf.nn.relu(net), training=training)
        with tf.name_scope('final_layer'):
            net = tf.reduce_mean(tf.nn.relu(net), [1, 2])
        if end_points.add('global_pool', net):
            return net, end_points
        raise end_points.unknown_final_endpoint()

    @tf.autograph.experimental.do_not_convert
    def forward(self, images, *, training, step=None):
        net, end_points = self.forward_base(images, final_endpoint='global_pool',
                                            training=training, step=step)
        if not self.num_classes:
            return net, end_points
        net = layers.dropout(net, self.dropout_keep_prob, training=training)
        logits = end_points['Logits'] = self.logits(net, training=training)
        with tf.name_scope('final_layer'):
            end_points['Predictions'] = tf.nn.softmax(logits, name='predictions')
        return logits, end_points
