"""Inception-ResNet-v2 as in TF-Slim (Szegedy et al. 2016, "Inception-v4,
Inception-ResNet and the Impact of Residual Connections on Learning", arXiv 1602.07261):
Inception v3's stem, Mixed_5b, 10 residual 35x35 blocks, Mixed_6a, 20 residual 17x17
blocks, Mixed_7a, 9 residual 8x8 blocks and a last one without activation, a 1x1 conv
to 1536 channels; an auxiliary head on PreAuxLogits (built in both modes, as slim) and
a fully connected classifier. Blocks are described as data below.

A residual block adds `scale * up` to its input, `up` a biased 1x1 conv (no batch
norm, no activation) of its branches' concatenation, then applies `activation_fn`.
`drop_path_rate` adds stochastic depth: in training, residual block i of the net's 40
(from 0: block35_1 .. block8_9, then Block8) drops its scaled branch per example with
probability drop_path_rate * i / 39 before the add (layers.drop_path_rates).

slim's quirks kept:
- its own arg scope: Xavier weights, L2 on weights and biases alike;
- `activation_fn` acts on the residual blocks only (the convs keep ReLU), and with
  tf.nn.relu6 the scaled residual is first clipped to [-6, 6];
- `output_stride=8` keeps Mixed_6a unstrided and dilates the 17x17 blocks (rate 2), but
  only up to 'PreAuxLogits': going further raises, as in slim;
- `align_feature_maps=True` turns every VALID padding SAME (maps of ceil(size/stride));
- the final pooling averages the whole feature map, recorded as 'global_pool'; the
  auxiliary head's 'Conv2d_2a_5x5' spans the whole pooled map (5x5 only at 299);
  flatten comes before dropout.
"""
from typing import Callable, Optional

import tensorflow as tf

from nets import heads, inception_blocks, layers
from nets.atrous import AtrousSchedule
from nets.inception_blocks import BATCH_NORM, STEM_299
from nets.network import EndPoints, Network
from nets.registry import register_network

# --- Block descriptions (nets/inception_blocks.py). ---

MIXED_5B = [
    [('conv', 'Conv2d_1x1', 96, 1)],
    [('conv', 'Conv2d_0a_1x1', 48, 1), ('conv', 'Conv2d_0b_5x5', 64, 5)],
    [('conv', 'Conv2d_0a_1x1', 64, 1), ('conv', 'Conv2d_0b_3x3', 96, 3),
     ('conv', 'Conv2d_0c_3x3', 96, 3)],
    [('avg', 'AvgPool_0a_3x3', 3, 1, 'SAME'), ('conv', 'Conv2d_0b_1x1', 64, 1)],
]


def _mixed_6a(stride):  # unstrided at output_stride 8
    return [
        [('conv', 'Conv2d_1a_3x3', 384, 3, stride, 'VALID')],
        [('conv', 'Conv2d_0a_1x1', 256, 1), ('conv', 'Conv2d_0b_3x3', 256, 3),
         ('conv', 'Conv2d_1a_3x3', 384, 3, stride, 'VALID')],
        [('max', 'MaxPool_1a_3x3', 3, stride, 'VALID')],
    ]


MIXED_7A = [
    [('conv', 'Conv2d_0a_1x1', 256, 1), ('conv', 'Conv2d_1a_3x3', 384, 3, 2, 'VALID')],
    [('conv', 'Conv2d_0a_1x1', 256, 1), ('conv', 'Conv2d_1a_3x3', 288, 3, 2, 'VALID')],
    [('conv', 'Conv2d_0a_1x1', 256, 1), ('conv', 'Conv2d_0b_3x3', 288, 3),
     ('conv', 'Conv2d_1a_3x3', 320, 3, 2, 'VALID')],
    [('max', 'MaxPool_1a_3x3', 3, 2, 'VALID')],
]
BLOCK35 = [
    [('conv', 'Conv2d_1x1', 32, 1)],
    [('conv', 'Conv2d_0a_1x1', 32, 1), ('conv', 'Conv2d_0b_3x3', 32, 3)],
    [('conv', 'Conv2d_0a_1x1', 32, 1), ('conv', 'Conv2d_0b_3x3', 48, 3),
     ('conv', 'Conv2d_0c_3x3', 64, 3)],
]
BLOCK17 = [
    [('conv', 'Conv2d_1x1', 192, 1)],
    [('conv', 'Conv2d_0a_1x1', 128, 1), ('conv', 'Conv2d_0b_1x7', 160, [1, 7]),
     ('conv', 'Conv2d_0c_7x1', 192, [7, 1])],
]
BLOCK8 = [
    [('conv', 'Conv2d_1x1', 192, 1)],
    [('conv', 'Conv2d_0a_1x1', 192, 1), ('conv', 'Conv2d_0b_1x3', 224, [1, 3]),
     ('conv', 'Conv2d_0c_3x1', 256, [3, 1])],
]
# The residual blocks by stage: (scope of the repeat, block name, count, scale, depth
# (the block's input's), branches).
REPEATS = {
    '35x35': ('Repeat', 'block35', 10, 0.17, 320, BLOCK35),
    '17x17': ('Repeat_1', 'block17', 20, 0.10, 1088, BLOCK17),
    '8x8': ('Repeat_2', 'block8', 9, 0.20, 2080, BLOCK8),
}
OUTPUT_STRIDES = (8, 16)
STRIDE_BEFORE_MIXED_6A = 8  # the stem's Conv2d_1a_3x3, MaxPool_3a_3x3 and MaxPool_5a_3x3
# The last end point an output stride of 8 reaches (as far as slim supports it).
LAST_ENDPOINT_AT_STRIDE_8 = 'PreAuxLogits'


def _aligned(spec, align_feature_maps):
    """The spec with VALID padding turned SAME when feature maps are to be aligned."""
    return tuple('SAME' if align_feature_maps and part == 'VALID' else part
                 for part in spec)


class ResidualBlock(layers.Module):
    """block35/block17/block8: input + scale * up(concat(branches)), then activation.
    The net's drop-path schedule sets `drop_path_rate`, its scaled branch's."""

    drop_path_rate = 0.0

    def __init__(self, name, branches, *, scale: float, activation: Optional[Callable],
                 conv, up: layers.Conv2D):
        super().__init__(name)
        self.branches = inception_blocks.build_mixed('', branches, conv)  # no own scope
        self.up = up
        self.scale, self.activation = scale, activation

    def forward(self, inputs, *, training, random_generator=None):
        residual = self.up(self.branches(inputs, training=training), training=training)
        residual = residual * self.scale
        if self.activation is tf.nn.relu6:  # slim's "bandpass": clip before the add
            residual = tf.clip_by_value(residual, -6.0, 6.0)
        residual = layers.stochastic_depth(residual, self.drop_path_rate, training=training,
                                           random_generator=random_generator)
        net = inputs + residual
        return self.activation(net) if self.activation else net


class Repeat(layers.Sequential):
    """slim's `slim.repeat` of residual blocks under one scope ('Repeat', 'Repeat_1', ...),
    handing each block drop-path's generator."""

    def forward(self, inputs, training, random_generator=None):
        for block in self.layers:
            inputs = block(inputs, training=training, random_generator=random_generator)
        return inputs


class InceptionResnetV2(Network):

    default_final_endpoint = 'Conv2d_7b_1x1'
    random_in_base = True  # drop-path's masks

    def __init__(self, num_classes: int = 1001, *, weight_decay: float = 0.00004,
                 is_training: bool = False, dropout_keep_prob: float = 0.8,
                 create_aux_logits: bool = True, activation_fn: Optional[Callable] = tf.nn.relu,
                 output_stride: int = 16, align_feature_maps: bool = False,
                 drop_path_rate: float = 0.0, scope: str = 'InceptionResnetV2',
                 batch_norm: layers.BatchNormParams = BATCH_NORM, spec=None,
                 quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        self.batch_norm = batch_norm
        if output_stride not in OUTPUT_STRIDES:
            raise ValueError(f'output_stride must be 8 or 16, got {output_stride!r}.')
        self.dropout_keep_prob = dropout_keep_prob
        self.weight_decay = weight_decay
        self.output_stride = output_stride
        # At output stride 8, Mixed_6a keeps the resolution and the 17x17 blocks dilate.
        schedule = AtrousSchedule(output_stride, current_stride=STRIDE_BEFORE_MIXED_6A)
        mixed_6a_stride, _ = schedule.place(2)
        block17_rate = schedule.rate

        def aligned(spec):
            return _aligned(spec, align_feature_maps)

        def mixed(name, branches):
            return inception_blocks.build_mixed(
                name, [[aligned(spec) for spec in branch] for branch in branches], self._conv)

        def repeat(stage, activation=activation_fn, rate=1):
            scope_name, block, count, scale, depth, branches = REPEATS[stage]
            return Repeat(scope_name, [
                self._residual_block(f'{block}_{i}', branches, depth, scale, activation,
                                     rate) for i in range(1, count + 1)])

        # (end point or None, layer), in order.
        self.blocks = [(layer_spec[1],
                        inception_blocks.build_layer(aligned(layer_spec), self._conv))
                       for layer_spec in STEM_299]
        self.blocks += [
            ('Mixed_5b', mixed('Mixed_5b', MIXED_5B)),
            (None, repeat('35x35')),
            ('Mixed_6a', mixed('Mixed_6a', _mixed_6a(mixed_6a_stride))),
            ('PreAuxLogits', repeat('17x17', rate=block17_rate)),
            ('Mixed_7a', mixed('Mixed_7a', MIXED_7A)),
            (None, repeat('8x8')),
            (None, self._residual_block('Block8', BLOCK8, 2080, 1.0, None)),
            ('Conv2d_7b_1x1', self._conv('Conv2d_7b_1x1', 1536, 1)),
        ]
        self.aux_head = self.logits = None
        if num_classes:
            if create_aux_logits:
                self.aux_head = inception_blocks.AuxHead(
                    self._conv, conv_name='Conv2d_2a_5x5', logits=self._fully_connected('Logits'))
            self.logits = self._fully_connected('Logits/Logits')
        residual_blocks = [block for _, layer in self.blocks
                           for block in (layer.layers if isinstance(layer, Repeat) else [layer])
                           if isinstance(block, ResidualBlock)]
        layers.schedule_drop_path(residual_blocks, drop_path_rate)

    def _conv(self, name, depth, kernel, stride=1, padding='SAME', rate=1):
        # slim's inception_resnet_v2_arg_scope: batch norm, ReLU, Xavier weights.
        return layers.Conv2D(name, depth, kernel, stride=stride, padding=padding, rate=rate,
                             normalizer=self.batch_norm, weight_decay=self.weight_decay,
                             quantization=self.quantization)

    def _fully_connected(self, name):
        return layers.FullyConnected(name, self.num_classes, activation=None,
                                     weight_decay=self.weight_decay,
                                     biases_weight_decay=self.weight_decay,
                                     quantization=self.quantization)

    def _residual_block(self, name, branches, depth, scale, activation, rate=1):
        def conv(*args):
            return self._conv(*args, rate=rate)
        up = layers.Conv2D('Conv2d_1x1', depth, 1, activation=None,
                           weight_decay=self.weight_decay,
                           biases_weight_decay=self.weight_decay,
                           quantization=self.quantization)
        return ResidualBlock(name, branches, scale=scale, activation=activation, conv=conv,
                             up=up)

    def forward_base(self, images, *, final_endpoint, training, random_generator=None):
        end_points = EndPoints(final_endpoint)
        net = images
        for name, layer in self.blocks:
            if name == 'Mixed_7a' and self.output_stride == 8:
                raise ValueError(f'output_stride=8 reaches {LAST_ENDPOINT_AT_STRIDE_8!r} '
                                 f'at most (as in TF-Slim); asked for {final_endpoint!r}.')
            if isinstance(layer, (Repeat, ResidualBlock)):
                net = layer(net, training=training, random_generator=random_generator)
            else:
                net = layers.apply(layer, net, training=training)
            if name and end_points.add(name, net):
                return net, end_points
        raise end_points.unknown_final_endpoint()

    def forward(self, images, *, training, random_generator=None):
        net, end_points = self.forward_base(images, final_endpoint='Conv2d_7b_1x1',
                                            training=training,
                                            random_generator=random_generator)
        if self.aux_head is not None:
            end_points['AuxLogits'] = self.aux_head(end_points['PreAuxLogits'],
                                                    training=training)
        with tf.name_scope('Logits'):  # op names as slim's ('InceptionResnetV2/Logits/...')
            net = end_points['global_pool'] = heads.whole_map_average(net)
            if not self.num_classes:
                return net, end_points
            net = layers.flatten(net)
            net = end_points['PreLogitsFlatten'] = layers.dropout(
                net, self.dropout_keep_prob, training=training,
                random_generator=random_generator)
            logits = end_points['Logits'] = self.logits(net, training=training)
            end_points['Predictions'] = tf.nn.softmax(logits, name='Predictions')
        return logits, end_points


@register_network('inception_resnet_v2', default_image_size=299,
                  preprocessing_name='inception', checkpoint_num_classes=1001,
                  checkpoint_file='inception_resnet_v2_2016_08_30.tar.gz',
                  drop_path_option='drop_path_rate',
                  batch_norm=BATCH_NORM)
def inception_resnet_v2(num_classes=1001, weight_decay=0.00004, is_training=False,
                        **options) -> Optional[InceptionResnetV2]:
    return InceptionResnetV2(num_classes, weight_decay=weight_decay,
                             is_training=is_training, **options)
