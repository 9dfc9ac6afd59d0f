"""ConvNeXt (Liu et al. 2022, "A ConvNet for the 2020s", arXiv 2201.03545) on the layer kit.

A 4x4 stride-4 "patchify" conv and a layer norm (the stem), then four stages at strides
4, 8, 16 and 32. Stages after the first open with a downsampling layer, a layer norm and
a 2x2 stride-2 conv. Each block is a residual branch: a 7x7 depthwise conv, a layer
norm, a pointwise layer expanding 4x, GELU (the exact erf form), a pointwise layer
back, and a learned per-channel layer scale (initialised to 1e-6) before the add. The
head averages the map, layer-normalises it and applies a dense layer. Every conv and
dense layer has biases; the net has no batch norm. Layer norms use epsilon 1e-6. These
facts match the paper's release and Keras's `keras.applications.ConvNeXt*`.

The pointwise layers are dense layers over the channels (as in the official release).
Weights start from a truncated normal of stddev 0.02 and biases from zeros, as the
release initialises them. `weight_decay` is an L2 term on conv and dense weights only
(not on biases, norms or layer scales, which the release's AdamW also exempts).
`drop_path_rate` is stochastic depth: block i of the net's n (from 0, over all
stages) drops its branch per example with probability drop_path_rate * i / (n - 1),
the release's linear rule. `dropout_keep_prob` applies dropout before the dense head
(1.0 by default, as the release trains ImageNet-1k).

Variables, under the net's scope (e.g. 'convnext_tiny'), are named as docs/networks.md
lists: 'stem/conv', 'stem/layer_norm', 'stage_<i>/downsample/{layer_norm,conv}' (i >
0), 'stage_<i>/block_<j>/{depthwise_conv,layer_norm,pointwise_conv_1,pointwise_conv_2,
layer_scale}', 'head/layer_norm' and 'head/logits'.
"""
from typing import Optional, Sequence

import tensorflow as tf

from nets import heads, layers
from nets.network import EndPoints, Network
from nets.registry import register_network

EPSILON = 1e-6  # of every layer norm
LAYER_SCALE_INIT = 1e-6
# Our module path (under the net's scope) -> timm's `convnext_*` module path (an importer's
# table, nets/timm_import); <i> is the stage, <j> the block.
TIMM_NAMES = (
    ('stem/conv', 'stem.0'),
    ('stem/layer_norm', 'stem.1'),
    ('stage_<i>/downsample/layer_norm', 'stages.<i>.downsample.0'),
    ('stage_<i>/downsample/conv', 'stages.<i>.downsample.1'),
    ('stage_<i>/block_<j>/depthwise_conv', 'stages.<i>.blocks.<j>.conv_dw'),
    ('stage_<i>/block_<j>/layer_norm', 'stages.<i>.blocks.<j>.norm'),
    ('stage_<i>/block_<j>/pointwise_conv_1', 'stages.<i>.blocks.<j>.mlp.fc1'),
    ('stage_<i>/block_<j>/pointwise_conv_2', 'stages.<i>.blocks.<j>.mlp.fc2'),
    ('stage_<i>/block_<j>/layer_scale', 'stages.<i>.blocks.<j>.gamma'),
    ('head/layer_norm', 'head.norm'),
    ('head/logits', 'head.fc'),
)
EXPANSION = 4
WEIGHTS_INITIALIZER = layers.truncated_normal_initializer(0.02)
# Variant -> (blocks per stage, channels per stage), as the paper's Table / Keras's.
VARIANTS = {
    'tiny': ((3, 3, 9, 3), (96, 192, 384, 768)),
    'small': ((3, 3, 27, 3), (96, 192, 384, 768)),
    'base': ((3, 3, 27, 3), (128, 256, 512, 1024)),
    'large': ((3, 3, 27, 3), (192, 384, 768, 1536)),
    'xlarge': ((3, 3, 27, 3), (256, 512, 1024, 2048)),
}


def _pointwise(layer, inputs, training):
    """A dense layer over the channels of a [batch, height, width, channels] map, run as
    one 2-D matmul (the kit's dense path on a 2-D input)."""
    shape = tf.shape(inputs)
    flat = tf.reshape(inputs, [-1, inputs.shape[-1]])
    outputs = layer(flat, training=training)
    return tf.reshape(outputs, tf.concat([shape[:-1], [layer.num_outputs]], 0))


class Block(layers.Module):
    """One ConvNeXt block, 'stage_<i>/block_<j>'. The net's drop-path schedule sets
    `drop_path_rate`, its branch's. ConvNeXt V2's block (nets/convnext_v2.py) has a
    global response norm after the GELU and no layer scale (`layer_scale_init=None`)."""

    drop_path_rate = 0.0

    def __init__(self, name: str, depth: int, *, weight_decay: float, quantization,
                 layer_scale_init: Optional[float] = LAYER_SCALE_INIT,
                 global_response_norm: bool = False):
        super().__init__(name)
        self.depth = depth
        options = dict(activation=None, weights_initializer=WEIGHTS_INITIALIZER,
                       weight_decay=weight_decay, quantization=quantization)
        self.depthwise_conv = layers.SeparableConv2D('depthwise_conv', None, 7, **options)
        self.layer_norm = layers.LayerNorm('layer_norm', epsilon=EPSILON)
        self.pointwise_conv_1 = layers.FullyConnected('pointwise_conv_1',
                                                      EXPANSION * depth, **options)
        self.response_norm = (layers.GlobalResponseNorm('global_response_norm',
                                                        epsilon=EPSILON)
                              if global_response_norm else None)
        self.pointwise_conv_2 = layers.FullyConnected('pointwise_conv_2', depth, **options)
        self.layer_scale_init = layer_scale_init
        self.layer_scale = None

    def forward(self, inputs, *, training: bool, random_generator=None):
        if self.layer_scale is None and self.layer_scale_init is not None:
            self.layer_scale = self._add_variable(
                'layer_scale', [self.depth],
                layers.constant_initializer(self.layer_scale_init))
        branch = self.depthwise_conv(inputs, training=training)
        branch = self.layer_norm(branch, training=training)
        branch = _pointwise(self.pointwise_conv_1, branch, training)
        branch = tf.nn.gelu(branch, approximate=False)
        if self.response_norm is not None:
            branch = self.response_norm(branch, training=training)
        branch = _pointwise(self.pointwise_conv_2, branch, training)
        if self.layer_scale is not None:
            branch *= tf.cast(self.layer_scale, branch.dtype)
        branch = layers.stochastic_depth(branch, self.drop_path_rate, training=training,
                                         random_generator=random_generator)
        return inputs + branch


class Stage(layers.Module):
    """'stage_<i>': a downsampling layer (layer norm, 2x2 stride-2 conv) unless it is the
    first stage, then its blocks."""

    def __init__(self, index: int, depth: int, num_blocks: int, *, weight_decay: float,
                 quantization, **block_options):
        super().__init__(f'stage_{index}')
        self.downsample = None
        if index > 0:
            self.downsample = layers.Sequential('downsample', [
                layers.LayerNorm('layer_norm', epsilon=EPSILON),
                layers.Conv2D('conv', depth, 2, stride=2, padding='VALID', activation=None,
                              weights_initializer=WEIGHTS_INITIALIZER,
                              weight_decay=weight_decay, quantization=quantization)])
        self.blocks = [Block(f'block_{j}', depth, weight_decay=weight_decay,
                             quantization=quantization, **block_options)
                       for j in range(num_blocks)]

    def forward(self, inputs, *, training: bool, random_generator=None):
        net = inputs
        if self.downsample is not None:
            net = self.downsample(net, training=training)
        for block in self.blocks:
            net = block(net, training=training, random_generator=random_generator)
        return net


class ConvNeXt(Network):
    """End points: 'stem' (stride 4), 'stage_0' .. 'stage_3' (strides 4, 8, 16, 32; each
    after its last block), 'global_pool' ([batch, channels]), 'head_norm' (its layer
    norm: what num_classes=0 returns), 'Logits' and 'Predictions'.

    `layer_scale_init` (None: no layer scale) and `global_response_norm` shape every
    block: ConvNeXt's defaults, or ConvNeXt V2's None and True."""

    default_final_endpoint = 'stage_3'
    random_in_base = True  # drop-path's masks

    def __init__(self, num_classes: int = 1000, *, depths: Sequence[int],
                 blocks_per_stage: Sequence[int], scope: str, weight_decay: float = 0.0,
                 is_training: bool = False, dropout_keep_prob: float = 1.0,
                 drop_path_rate: float = 0.0, spec=None, quantization=None,
                 layer_scale_init: Optional[float] = LAYER_SCALE_INIT,
                 global_response_norm: bool = False):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        if len(depths) != len(blocks_per_stage):
            raise ValueError(f'depths {depths} and blocks_per_stage {blocks_per_stage} '
                             'need one entry per stage.')
        self.dropout_keep_prob = dropout_keep_prob
        self.stem = layers.Sequential('stem', [
            layers.Conv2D('conv', depths[0], 4, stride=4, padding='VALID', activation=None,
                          weights_initializer=WEIGHTS_INITIALIZER, weight_decay=weight_decay,
                          quantization=self.quantization),
            layers.LayerNorm('layer_norm', epsilon=EPSILON)])
        self.stages = [Stage(i, depth, count, weight_decay=weight_decay,
                             quantization=self.quantization,
                             layer_scale_init=layer_scale_init,
                             global_response_norm=global_response_norm)
                       for i, (depth, count) in enumerate(zip(depths, blocks_per_stage))]
        layers.schedule_drop_path(self.residual_blocks, drop_path_rate)
        self.head_norm = layers.LayerNorm('head/layer_norm', epsilon=EPSILON)
        self.logits = (layers.FullyConnected(
            'head/logits', num_classes, activation=None,
            weights_initializer=WEIGHTS_INITIALIZER, weight_decay=weight_decay,
            quantization=self.quantization) if num_classes else None)

    @property
    def residual_blocks(self):
        """Every block, in forward order."""
        return [block for stage in self.stages for block in stage.blocks]

    def forward_base(self, images, *, final_endpoint, training, random_generator=None):
        end_points = EndPoints(final_endpoint)
        net = self.stem(images, training=training)
        if end_points.add('stem', net):
            return net, end_points
        for stage in self.stages:
            net = stage(net, training=training, random_generator=random_generator)
            if end_points.add(stage.relative_name, net):
                return net, end_points
        raise end_points.unknown_final_endpoint()

    def forward(self, images, *, training, random_generator=None):
        net, end_points = self.forward_base(
            images, final_endpoint=self.stages[-1].relative_name, training=training,
            random_generator=random_generator)

        def pool_and_normalize(features):
            pooled = end_points['global_pool'] = tf.reduce_mean(features, [1, 2],
                                                                name='global_pool')
            return 'head_norm', self.head_norm(pooled, training=training)

        output = heads.conv_classifier(
            net, self.logits, end_points, pool=pool_and_normalize,
            dropout_keep_prob=self.dropout_keep_prob, training=training,
            random_generator=random_generator, spatial_squeeze=False)
        return output, end_points


def _register(name, variant):
    """Registers `name` (also its scope): ConvNeXt of the paper's `variant`."""
    blocks_per_stage, depths = VARIANTS[variant]

    @register_network(name, default_image_size=224, preprocessing_name='convnext',
                      drop_path_option='drop_path_rate')
    def build(num_classes=1000, weight_decay=0.0, is_training=False, **options):
        return ConvNeXt(num_classes, depths=depths, blocks_per_stage=blocks_per_stage,
                        scope=name, weight_decay=weight_decay, is_training=is_training,
                        **options)

    build.__name__ = build.__qualname__ = name
    return build


convnext_tiny = _register('convnext_tiny', 'tiny')
convnext_small = _register('convnext_small', 'small')
convnext_base = _register('convnext_base', 'base')
convnext_large = _register('convnext_large', 'large')
convnext_xlarge = _register('convnext_xlarge', 'xlarge')
