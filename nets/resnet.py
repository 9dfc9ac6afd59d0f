"""ResNet v1 (He et al. 2015, arXiv 1512.03385) and v2 (pre-activation, arXiv 1603.05027)
as in TF-Slim: one generic builder, blocks and units as data.

slim's choices kept: the stride of a block sits in its last unit (so block outputs keep
their resolution until the block's end); `output_stride` turns the strides past it into
atrous rates; strided 3x3 convs pad explicitly (conv2d_same); v2's conv1, shortcut convs
and each unit's last conv have biases and no batch norm, with a 'preact' batch norm per
unit and a 'postnorm' one after the last block.

`drop_path_rate` adds stochastic depth (Huang et al. 2016, arXiv 1603.09382) as timm's
ResNet does: in training, unit i of the net's n (from 0, over all blocks) drops its
residual branch per example with probability drop_path_rate * i / (n - 1) before the
add (layers.drop_path_rates); nothing changes at evaluation or at rate 0.
"""
import dataclasses
from typing import List, Optional

import tensorflow as tf

from nets import layers
from nets.atrous import AtrousSchedule
from nets.network import EndPoints, Network
from nets.registry import register_network

BATCH_NORM = layers.BatchNormParams(decay=0.997, epsilon=1e-5, center=True, scale=True)
UNITS_PER_BLOCK = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3),
                   200: (3, 24, 36, 3)}


@dataclasses.dataclass(frozen=True)
class Unit:
    depth: int
    depth_bottleneck: int
    stride: int


@dataclasses.dataclass(frozen=True)
class Block:
    scope: str
    units: List[Unit]


def bottleneck_blocks(units_per_block, base_depths=(64, 128, 256, 512),
                      strides=(2, 2, 2, 1)) -> List[Block]:
    """slim's resnet_v{1,2}_block: `count` units of depth 4 * base, the stride last."""
    return [Block(f'block{i}', [Unit(base * 4, base, 1)] * (count - 1)
                  + [Unit(base * 4, base, stride)])
            for i, (count, base, stride) in enumerate(
                zip(units_per_block, base_depths, strides), start=1)]


def _subsample(inputs, factor):
    return inputs if factor == 1 else layers.max_pool(inputs, 1, factor)


class Bottleneck(layers.Module):
    """One unit, 'blockN/unit_M/bottleneck_v1|v2': 1x1, 3x3 (strided, dilated), 1x1.
    The net's drop-path schedule sets `drop_path_rate`, its branch's."""

    drop_path_rate = 0.0

    def __init__(self, name, unit: Unit, rate: int, version: int, conv,
                 batch_norm: layers.BatchNormParams):
        super().__init__(name)
        self.unit, self.version = unit, version
        plain = dict(activation=None, normalizer=None)  # v2's biased, unnormalised convs
        last = plain if version == 2 else dict(activation=None)
        self.preact = (layers.BatchNorm('preact', batch_norm, activation=tf.nn.relu)
                       if version == 2 else None)
        self.shortcut_conv = None
        self._shortcut_options = dict(stride=unit.stride, **(plain if version == 2
                                                              else dict(activation=None)))
        self.conv1 = conv('conv1', unit.depth_bottleneck, 1)
        self.conv2 = conv('conv2', unit.depth_bottleneck, 3, stride=unit.stride, rate=rate,
                          same=True)
        self.conv3 = conv('conv3', unit.depth, 1, **last)
        self._conv = conv

    def forward(self, inputs, *, training, end_points, random_generator=None):
        preact = self.preact(inputs, training=training) if self.preact else inputs
        if inputs.shape[-1] == self.unit.depth:
            shortcut = _subsample(inputs, self.unit.stride)
        else:
            if self.shortcut_conv is None:
                self.shortcut_conv = self._conv('shortcut', self.unit.depth, 1,
                                                **self._shortcut_options)
                self.shortcut_conv.resolve_scopes(self.scope)
            shortcut = end_points[self.shortcut_conv.scope] = self.shortcut_conv(
                preact, training=training)
        residual = preact
        for conv in (self.conv1, self.conv2, self.conv3):
            residual = end_points[conv.scope] = conv(residual, training=training)
        residual = layers.stochastic_depth(residual, self.drop_path_rate, training=training,
                                           random_generator=random_generator)
        output = shortcut + residual
        output = tf.nn.relu(output) if self.version == 1 else output
        end_points[self.scope] = output
        return output


class ResNet(Network):

    default_final_endpoint = 'block4'
    random_in_base = True  # drop-path's masks

    def __init__(self, num_classes: Optional[int], *, blocks: List[Block], version: int,
                 scope: str, weight_decay: float = 0.0001, is_training: bool = False,
                 global_pool: bool = True, output_stride: Optional[int] = None,
                 include_root_block: bool = True, spatial_squeeze: bool = True,
                 store_non_strided_activations: bool = False, drop_path_rate: float = 0.0,
                 batch_norm: layers.BatchNormParams = BATCH_NORM, spec=None,
                 quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        if output_stride is not None:
            if output_stride % 4 != 0:
                raise ValueError('The output_stride needs to be a multiple of 4.')
            if include_root_block:
                output_stride //= 4
        self.version = version
        self.global_pool = global_pool
        self.spatial_squeeze = spatial_squeeze
        self.store_non_strided_activations = store_non_strided_activations

        def conv(name, depth, kernel, stride=1, rate=1, same=False, **options):
            options = {'normalizer': batch_norm,
                       'weights_initializer': layers.variance_scaling_initializer(),
                       'weight_decay': weight_decay, 'quantization': self.quantization,
                       **options}
            if same:
                return layers.conv2d_same(name, depth, kernel, stride, rate, **options)
            return layers.Conv2D(name, depth, kernel, stride=stride, **options)

        self.root = None
        if include_root_block:
            root_options = dict(activation=None, normalizer=None) if version == 2 else {}
            self.root = conv('conv1', 64, 7, stride=2, same=True, **root_options)
        # Where each unit runs, by slim's stack_blocks_dense (nets/atrous.py).
        schedule = AtrousSchedule(output_stride)
        self.blocks, self.block_strides = [], []
        for block in blocks:
            units = []
            block_stride = 1
            for index, unit in enumerate(block.units):
                if store_non_strided_activations and index == len(block.units) - 1:
                    block_stride, unit = unit.stride, dataclasses.replace(unit, stride=1)
                schedule.check_not_past()
                stride, rate = schedule.place(unit.stride)
                units.append(Bottleneck(f'{block.scope}/unit_{index + 1}/bottleneck_v{version}',
                                        dataclasses.replace(unit, stride=stride), rate,
                                        version, conv, batch_norm))
            # The block's own subsampling (store_non_strided_activations) never dilates.
            block_stride, _ = schedule.place(block_stride)
            self.blocks.append((block.scope, units))
            self.block_strides.append(block_stride)
        schedule.check_reached()
        layers.schedule_drop_path([unit for _, units in self.blocks for unit in units],
                                  drop_path_rate)
        self.postnorm = (layers.BatchNorm('postnorm', batch_norm, activation=tf.nn.relu)
                         if version == 2 else None)
        self.logits = (layers.Conv2D('logits', num_classes, 1, activation=None,
                                     weights_initializer=layers.variance_scaling_initializer(),
                                     weight_decay=weight_decay, quantization=self.quantization)
                       if num_classes else None)

    def forward_base(self, images, *, final_endpoint, training, random_generator=None):
        """The blocks' features: final_endpoint is 'block1'..'block4' (v2: the last one
        after 'postnorm')."""
        end_points = EndPoints(f'{self.scope}/{final_endpoint}')
        net = images
        if self.root is not None:
            net = end_points[self.root.scope] = self.root(net, training=training)
            net = layers.max_pool(net, 3, 2, 'SAME')
        for (scope, units), stride in zip(self.blocks, self.block_strides):
            for unit in units:
                net = unit(net, training=training, end_points=end_points,
                           random_generator=random_generator)
            done = end_points.add(f'{self.scope}/{scope}', net)
            net = _subsample(net, stride)
            if done:
                if self.postnorm is not None and scope == self.blocks[-1][0]:
                    net = self.postnorm(net, training=training)
                return net, end_points
        raise end_points.unknown_final_endpoint()

    def forward(self, images, *, training, random_generator=None):  # no dropout
        net, end_points = self.forward_base(images, final_endpoint=self.blocks[-1][0],
                                            training=training,
                                            random_generator=random_generator)
        if self.global_pool:
            net = end_points['global_pool'] = tf.reduce_mean(net, [1, 2], keepdims=True,
                                                             name='pool5')
        if not self.num_classes:
            return net, end_points
        net = end_points[f'{self.scope}/logits'] = self.logits(net, training=training)
        if self.spatial_squeeze:
            net = end_points[f'{self.scope}/spatial_squeeze'] = tf.squeeze(
                net, [1, 2], name='SpatialSqueeze')
        end_points['predictions'] = tf.nn.softmax(net, name='predictions')
        return net, end_points


def _register(name, version, units_per_block, checkpoint_file):
    """Registers slim's `name` (also its scope): ResNet v`version` with these units."""

    @register_network(name, default_image_size=224, preprocessing_name='vgg',
                      checkpoint_num_classes=(1000 if version == 1 else 1001)
                      if checkpoint_file else None,
                      checkpoint_file=checkpoint_file, drop_path_option='drop_path_rate',
                      batch_norm=BATCH_NORM)
    def build(num_classes=None, weight_decay=0.0001, is_training=False, depth_multiplier=1.0,
              min_base_depth=8, **options):
        base_depths = (64, 128, 256, 512)
        if version == 1:  # only v1 takes a depth multiplier, as slim
            base_depths = tuple(max(int(d * depth_multiplier), min_base_depth)
                                for d in base_depths)
        elif depth_multiplier != 1.0:
            raise ValueError('resnet_v2 has no depth_multiplier (slim\'s v1 only).')
        return ResNet(num_classes, blocks=bottleneck_blocks(units_per_block, base_depths),
                      version=version, scope=name, weight_decay=weight_decay,
                      is_training=is_training, **options)

    build.__name__ = build.__qualname__ = name
    return build


resnet_v1_50 = _register('resnet_v1_50', 1, UNITS_PER_BLOCK[50],
                         'resnet_v1_50_2016_08_28.tar.gz')
resnet_v1_101 = _register('resnet_v1_101', 1, UNITS_PER_BLOCK[101],
                          'resnet_v1_101_2016_08_28.tar.gz')
resnet_v1_152 = _register('resnet_v1_152', 1, UNITS_PER_BLOCK[152],
                          'resnet_v1_152_2016_08_28.tar.gz')
resnet_v1_200 = _register('resnet_v1_200', 1, UNITS_PER_BLOCK[200], None)
resnet_v2_50 = _register('resnet_v2_50', 2, UNITS_PER_BLOCK[50],
                         'resnet_v2_50_2017_04_14.tar.gz')
resnet_v2_101 = _register('resnet_v2_101', 2, UNITS_PER_BLOCK[101],
                          'resnet_v2_101_2017_04_14.tar.gz')
resnet_v2_152 = _register('resnet_v2_152', 2, UNITS_PER_BLOCK[152],
                          'resnet_v2_152_2017_04_14.tar.gz')
resnet_v2_200 = _register('resnet_v2_200', 2, UNITS_PER_BLOCK[200], None)
