"""The MobileNetV4 network: a 3x3 stride-2 stem, five stages of blocks (nets/mobilenet_v4/
blocks.py), global average pooling, a 1x1 head convolution to 1280 with batch norm and
the activation, dropout and a dense classifier (timm's MobileNetV3 class with
`head_norm`, as its `mobilenetv4_*` weights have it).

Variables, under the net's scope (e.g. 'mobilenet_v4_conv_small'): 'stem/conv',
'stage_<i>/block_<j>/<layer>' (layers as blocks.py names them), 'head/conv',
'head/logits'. No convolution has biases: a batch norm's beta follows each, except
Mobile MQA's projections, which have neither; the classifier has biases.

End points: 'stem' (stride 2), 'stage_0' .. 'stage_4' (strides 4, 8, 16, 32, 32; each
after its last block: `base()`'s default is 'stage_4'), 'global_pool' [batch, depth],
'pre_logits' (the head convolution's [batch, 1280]: what num_classes=0 returns, as
timm's), 'Logits', 'Predictions'.

Drop-path as timm schedules it: block i of all n (from 0, over every stage, counting
the blocks without a residual) drops its residual branch per example, in training, with
probability drop_path_rate * i / n.
"""
from typing import Callable, Optional, Sequence

import tensorflow as tf

from nets import heads, layers
from nets.efficientnet.blocks import conv_kernel_initializer, dense_kernel_initializer
from nets.mobilenet_v4 import blocks
from nets.network import EndPoints, Network

HEAD_DEPTH = 1280


def build_block(name, spec, *, input_depth, activation, batch_norm, options,
                layer_scale_init):
    """The block module of `spec` (a blocks.*Spec)."""
    if isinstance(spec, blocks.ConvSpec):
        return blocks.ConvBlock(name, spec, activation=activation, options=options)
    if isinstance(spec, blocks.FusedSpec):
        return blocks.FusedInvertedBottleneck(name, spec, input_depth=input_depth,
                                              activation=activation, options=options)
    if isinstance(spec, blocks.UIBSpec):
        return blocks.UniversalInvertedBottleneck(
            name, spec, input_depth=input_depth, activation=activation, options=options,
            layer_scale_init=layer_scale_init)
    if isinstance(spec, blocks.MQASpec):
        return blocks.MobileMQA(name, spec, input_depth=input_depth, batch_norm=batch_norm,
                                options=options, layer_scale_init=layer_scale_init)
    raise TypeError(f'Not a MobileNetV4 block spec: {spec!r}.')


class MobileNetV4(Network):
    """A MobileNetV4 from its block table: `stages`, a sequence of block-spec sequences;
    `layer_scale_init` (None: none) scales the UIB and MQA branches; `head_depth` is the
    head convolution's (1280 in every variant)."""

    default_final_endpoint = 'stage_4'
    random_in_base = True  # drop-path's masks

    def __init__(self, num_classes: int = 1000, *, stages: Sequence[Sequence],
                 stem_depth: int, scope: str, batch_norm: layers.BatchNormParams,
                 activation: Callable = tf.nn.relu,
                 layer_scale_init: Optional[float] = None, head_depth: int = HEAD_DEPTH,
                 weight_decay: float = 0.0,
                 is_training: bool = False, dropout_keep_prob: float = 1.0,
                 drop_path_rate: float = 0.0, spec=None, quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        if not 0.0 <= drop_path_rate < 1.0:
            raise ValueError(f'drop_path_rate must be in [0, 1), got {drop_path_rate!r}.')
        self.dropout_keep_prob = dropout_keep_prob
        options = dict(normalizer=batch_norm, weights_initializer=conv_kernel_initializer(),
                       weight_decay=weight_decay, quantization=self.quantization)
        self.stem = layers.Conv2D('stem/conv', stem_depth, 3, stride=2, padding='EXPLICIT',
                                  activation=activation, **options)
        self.stages, depth = [], stem_depth
        for index, stage in enumerate(stages):
            stage_blocks = []
            for spec_of_block in stage:
                stage_blocks.append(build_block(
                    f'stage_{index}/block_{len(stage_blocks)}', spec_of_block,
                    input_depth=depth, activation=activation, batch_norm=batch_norm,
                    options=options, layer_scale_init=layer_scale_init))
                depth = spec_of_block.depth
            self.stages.append(stage_blocks)
        for index, block in enumerate(self.blocks):
            block.drop_path_rate = drop_path_rate * index / len(self.blocks)
        self.head = layers.Conv2D('head/conv', head_depth, 1, activation=activation,
                                  **options)
        self.logits = None
        if num_classes:
            self.logits = layers.FullyConnected(
                'head/logits', num_classes, activation=None,
                weights_initializer=dense_kernel_initializer(), weight_decay=weight_decay,
                quantization=self.quantization)

    @property
    def blocks(self):
        """Every block, in forward order."""
        return [block for stage in self.stages for block in stage]

    @property
    def residual_blocks(self):
        """The blocks with a residual add, in forward order."""
        return [block for block in self.blocks if block.residual]

    def forward_base(self, images, *, final_endpoint, training, random_generator=None):
        end_points = EndPoints(final_endpoint)
        net = self.stem(images, training=training)
        if end_points.add('stem', net):
            return net, end_points
        for index, stage in enumerate(self.stages):
            for block in stage:
                net = block(net, training=training, random_generator=random_generator)
            if end_points.add(f'stage_{index}', net):
                return net, end_points
        raise end_points.unknown_final_endpoint()

    def forward(self, images, *, training, random_generator=None):
        net, end_points = self.forward_base(
            images, final_endpoint=self.default_final_endpoint, training=training,
            random_generator=random_generator)

        def pool_and_project(features):
            pooled = tf.reduce_mean(features, [1, 2], keepdims=True, name='global_pool')
            end_points['global_pool'] = tf.squeeze(pooled, [1, 2])
            return 'pre_logits', tf.squeeze(self.head(pooled, training=training), [1, 2])

        output = heads.conv_classifier(
            net, self.logits, end_points, pool=pool_and_project,
            dropout_keep_prob=self.dropout_keep_prob, training=training,
            random_generator=random_generator, spatial_squeeze=False)
        return output, end_points
