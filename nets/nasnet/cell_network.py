"""The network NASNet and PNASNet share: a stem, then cells (nets/nasnet/cells.py) by
plan, global average pooling and a fully connected classifier, with slim's
hyper-parameters (`Config`), drop-path schedule and auxiliary head.
"""
import dataclasses
from typing import List, Optional, Sequence, Tuple

import tensorflow as tf

from nets import layers
from nets.nasnet.cells import Cell, CellSpec, LayerOptions, apply_all
from nets.network import EndPoints, Network

# slim's nasnet_imagenet_arg_scope batch norm (the ImageNet NASNets and PNASNets).
IMAGENET_BATCH_NORM = layers.BatchNormParams(decay=0.9997, epsilon=1e-3, scale=True)


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


def imagenet_stem_cells(config: Config, spec: CellSpec) -> List[CellPlacement]:
    """The two strided stem cells after conv0, at a quarter and half the filters."""
    rate = config.filter_scaling_rate
    return [CellPlacement(f'cell_stem_{i}', 'Stem' if i == 1 else None, spec,
                          filter_scaling=rate ** (i - 2), stride=2, prev_state=i)
            for i in range(2)]


# --- Drop-path's schedule. ---

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
        net = apply_all(self.proj, net, training)
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
    `net(images, training=True, step=global_step, random_generator=generator)` schedules
    drop-path by the step and draws its masks from the generator.
    """

    uses_step = True

    def __init__(self, *, num_classes: int, is_training: bool, config: Config,
                 options: LayerOptions, stem: str, plan: Sequence[CellPlacement],
                 dropout_keep_prob: Optional[float] = None, spec=None, quantization=None):
        super().__init__(scope='', num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        options = dataclasses.replace(options, quantization=self.quantization)
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
    def forward_base(self, images, *, final_endpoint, training, step=None,
                     random_generator=None):
        end_points = EndPoints(final_endpoint)
        net = apply_all(self.stem, images, training)
        if self.stem_type == 'cifar' and end_points.add('Stem', net):
            return net, end_points
        states = [None, net]
        for depth, (placement, cell) in enumerate(zip(self.plan, self.cells)):
            net = cell(net, states[placement.prev_state], training=training,
                       keep_prob=self._keep_prob(depth, training, step),
                       random_generator=random_generator)
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
    def forward(self, images, *, training, step=None, random_generator=None):
        net, end_points = self.forward_base(images, final_endpoint='global_pool',
                                            training=training, step=step,
                                            random_generator=random_generator)
        if not self.num_classes:
            return net, end_points
        net = layers.dropout(net, self.dropout_keep_prob, training=training,
                             random_generator=random_generator)
        logits = end_points['Logits'] = self.logits(net, training=training)
        with tf.name_scope('final_layer'):
            end_points['Predictions'] = tf.nn.softmax(logits, name='predictions')
        return logits, end_points
