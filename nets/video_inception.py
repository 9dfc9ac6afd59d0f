"""The 3-D Inception v1 video nets of TF-Slim, I3D and S3D-G, as one network with two
configurations.

- I3D, Inflated 3D ConvNet (Carreira & Zisserman 2017, "Quo Vadis, Action Recognition?",
  arXiv 1705.07750): Inception v1 with every kxk conv inflated to a full kxkxk conv.
- S3D-G, gated separable 3-D net (Xie, Sun, Huang, Tu & Murphy 2017, "Rethinking
  Spatiotemporal Feature Learning", arXiv 1712.04851): each kxkxk conv split into a
  [1, k, k] spatial conv then a [k, 1, 1] temporal conv, and feature gating: every
  block's branch output scaled by a per-channel sigmoid of its clip-wide average.

Input is a clip `[batch, frames, height, width, 3]`; 64 frames of 224x224 give Mixed_5c
`[batch, 8, 7, 7, 1024]`. The classifier pools [2, 7, 7] (shrunk to small clips), applies
a 1x1x1 conv and averages the logits over the remaining frames.

slim's quirks kept:
- Both nets use the scope 'InceptionV1' and Inception v1's layer names (2-D names such
  as 'Conv2d_2c_3x3' on 3-D convs), so image checkpoints inflate by name.
- In a separable conv only the spatial half is batch-normalised; the temporal half
  ('<conv>/temporal') has biases and a ReLU and starts as the identity (its centre tap).
- Before `temporal_conv_startat` the kxk convs are [1, k, k]; convs, once started,
  stay temporal (and gated, once `gating_startat` is reached) to the end.
- Gating covers Conv2d_2c_3x3 and the last conv of every branch of a block, not the
  1x1 reductions; its 'self_gating/transformer_W' is a bias-free 1x1x1 conv.
- Batch norm is slim's unfused one (no gamma, decay 0.999, epsilon 0.001): its moving
  variance averages the biased batch variance.
- The stem's Conv2d_1a_7x7 is never separable; its temporal kernel is
  `first_temporal_kernel_size` (7 in I3D, 3 in S3D-G) and it strides 2 in time too.

Deviations: `num_classes=0` returns the time-averaged pooled features `[batch, 1, 1,
1024]` (slim built a 0-channel logits layer); gating averages over the whole map
whatever its shape (slim's pool window swapped height and width, so it only worked on
square frames); an unknown `temporal_conv_startat` or `gating_startat` raises (slim
silently never started); only the NDHWC layout.
"""
import dataclasses
from typing import Optional

import numpy as np
import tensorflow as tf

from nets import heads, inception_blocks, layers
from nets.network import Network
from nets.registry import register_network

# slim's i3d_arg_scope and s3dg_arg_scope: unfused batch norm, no gamma.
BATCH_NORM = layers.BatchNormParams(decay=0.999, epsilon=0.001, center=True, scale=False,
                                    fused=False)


def _mixed(depth_0, reduce_1, depth_1, reduce_2, depth_2, pool_projection):
    """A 3-D Inception v1 block: the depths of its six convs (slim's num_outputs_*)."""
    return ('mixed', dict(depth_0=depth_0, reduce_1=reduce_1, depth_1=depth_1,
                          reduce_2=reduce_2, depth_2=depth_2,
                          pool_projection=pool_projection))


# (end point, layer): ('conv', depth, spatial kernel, stride) | ('max', kernel, stride)
# | a block. Pools are [time, height, width]; every layer pads SAME.
ARCHITECTURE = [
    ('Conv2d_1a_7x7', ('conv', 64, 7, 2)),
    ('MaxPool_2a_3x3', ('max', (1, 3, 3), (1, 2, 2))),
    ('Conv2d_2b_1x1', ('conv', 64, 1, 1)),
    ('Conv2d_2c_3x3', ('conv', 192, 3, 1)),
    ('MaxPool_3a_3x3', ('max', (1, 3, 3), (1, 2, 2))),
    ('Mixed_3b', _mixed(64, 96, 128, 16, 32, 32)),
    ('Mixed_3c', _mixed(128, 128, 192, 32, 96, 64)),
    ('MaxPool_4a_3x3', ('max', (3, 3, 3), (2, 2, 2))),
    ('Mixed_4b', _mixed(192, 96, 208, 16, 48, 64)),
    ('Mixed_4c', _mixed(160, 112, 224, 24, 64, 64)),
    ('Mixed_4d', _mixed(128, 128, 256, 24, 64, 64)),
    ('Mixed_4e', _mixed(112, 144, 288, 32, 64, 64)),
    ('Mixed_4f', _mixed(256, 160, 320, 32, 128, 128)),
    ('MaxPool_5a_2x2', ('max', (2, 2, 2), (2, 2, 2))),
    ('Mixed_5b', _mixed(256, 160, 320, 32, 128, 128)),
    ('Mixed_5c', _mixed(384, 192, 384, 48, 128, 128)),
]
FIRST_LAYER = 'Conv2d_1a_7x7'
# Where temporal convs or gating may start (slim's `*_startat`).
START_POINTS = ('Conv2d_2c_3x3',) + tuple(name for name, (kind, *_) in ARCHITECTURE
                                          if kind == 'mixed')
TEMPORAL_KERNEL_SIZE = 3  # of every kxk conv once temporal convs have started


@dataclasses.dataclass(frozen=True)
class VideoConfig:
    """What tells I3D and S3D-G apart (slim's s3dg_base arguments and arg_scope)."""
    first_temporal_kernel_size: int
    temporal_conv_startat: Optional[str]
    gating_startat: Optional[str]
    separable: bool  # kxk convs split into [1, k, k] then [k, 1, 1]

    def validate(self):
        if self.first_temporal_kernel_size not in (1, 3, 5, 7):
            raise ValueError('first_temporal_kernel_size can only be 1, 3, 5 or 7, got '
                             f'{self.first_temporal_kernel_size!r}.')
        for option in ('temporal_conv_startat', 'gating_startat'):
            value = getattr(self, option)
            if value is not None and value not in START_POINTS:
                raise ValueError(f'{option} must be None or one of '
                                 f'{", ".join(START_POINTS)}; got {value!r}.')


I3D = VideoConfig(first_temporal_kernel_size=7, temporal_conv_startat='Conv2d_2c_3x3',
                  gating_startat=None, separable=False)
S3DG = VideoConfig(first_temporal_kernel_size=3, temporal_conv_startat='Conv2d_2c_3x3',
                   gating_startat='Conv2d_2c_3x3', separable=True)


def center_initializer() -> layers.Initializer:
    """slim's i3d_utils.center_initializer: a [k, 1, 1, c, c] kernel that copies the
    centre frame, so a fresh temporal conv is the identity (before its ReLU)."""

    def initialize(shape, dtype):
        frames, height, width, in_depth, out_depth = shape
        if frames % 2 == 0 or (height, width) != (1, 1) or in_depth != out_depth:
            raise ValueError(f'The centre initializer needs an odd [k, 1, 1, c, c] kernel, '
                             f'got {shape}.')
        value = np.zeros(shape, np.float32)
        value[frames // 2, 0, 0] = np.eye(in_depth, dtype=np.float32)
        return tf.constant(value, dtype)

    return initialize


class SelfGating(layers.Module):
    """S3D-G's feature gating: x * sigmoid(W · mean(x over time and space)), W a learned
    1x1x1 conv (no bias) under 'self_gating/transformer_W'."""

    def __init__(self, depth: int, weight_decay: float, quantization=None):
        super().__init__('self_gating')
        self.transformer = layers.Conv3D(
            'transformer_W', depth, 1, activation=None, biases_initializer=None,
            weights_initializer=layers.truncated_normal_initializer(0.01),
            weight_decay=weight_decay, quantization=quantization)

    def forward(self, inputs, *, training: bool):
        average = tf.reduce_mean(inputs, axis=[1, 2, 3], keepdims=True)
        return inputs * tf.sigmoid(self.transformer(average, training=training))


def _final_pool(features):
    """slim's reduced_kernel_size_3d: a [2, 7, 7] average, capped by the map (no end
    point)."""
    kernel = [k if size is None else min(size, k)
              for size, k in zip(features.shape[1:4], (2, 7, 7))]
    return None, layers.avg_pool(features, kernel, 1, 'VALID')


class VideoInception(Network):
    """I3D or S3D-G (by `config`): `net(clips)` with clips `[batch, frames, h, w, 3]`."""

    default_final_endpoint = 'Mixed_5c'

    def __init__(self, num_classes: int = 1000, *, config: VideoConfig,
                 weight_decay: float = 1e-7, is_training: bool = False,
                 dropout_keep_prob: float = 0.8, spatial_squeeze: bool = True,
                 depth_multiplier: float = 1.0, min_depth: int = 16,
                 scope: str = 'InceptionV1', batch_norm: layers.BatchNormParams = BATCH_NORM,
                 spec=None, quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        self.batch_norm = batch_norm
        config.validate()
        if depth_multiplier <= 0:
            raise ValueError('depth_multiplier is not greater than zero.')
        if not 0.0 < dropout_keep_prob <= 1.0:
            raise ValueError(f'dropout_keep_prob must be in (0, 1], got {dropout_keep_prob!r}.')
        self.config = config
        self.weight_decay = weight_decay
        self.dropout_keep_prob = dropout_keep_prob
        self.spatial_squeeze = spatial_squeeze
        self.depth_multiplier = depth_multiplier
        self.min_depth = min_depth
        self.end_point_layers = []  # (end point, layer)
        temporal = gated = False
        for name, (kind, *args) in ARCHITECTURE:
            temporal = temporal or name == config.temporal_conv_startat
            gated = gated or name == config.gating_startat
            if kind == 'conv':
                depth, kernel, stride = args
                frames = (config.first_temporal_kernel_size if name == FIRST_LAYER
                          else TEMPORAL_KERNEL_SIZE if temporal and kernel > 1 else 1)
                layer = self._unit(name, depth, (frames, kernel, kernel), stride,
                                   separable=config.separable and name != FIRST_LAYER,
                                   gated=gated)
            elif kind == 'max':
                layer = inception_blocks.Pool(layers.max_pool, *args, 'SAME')
            else:
                layer = self._block(name, **args[0], frames=TEMPORAL_KERNEL_SIZE if temporal
                                    else 1, gated=gated)
            self.end_point_layers.append((name, layer))
        self.logits = None
        if num_classes:
            # Outside the base's arg_scope: slim's default Xavier weights, with biases.
            self.logits = layers.Conv3D('Logits/Conv2d_0c_1x1', num_classes, 1,
                                        activation=None, weight_decay=weight_decay,
                                        quantization=self.quantization)

    def _depth(self, depth):
        return max(int(depth * self.depth_multiplier), self.min_depth)

    def _conv(self, name, depth, kernel, stride=1, **options):
        return layers.Conv3D(name, depth, kernel, stride=stride, normalizer=self.batch_norm,
                             weights_initializer=layers.truncated_normal_initializer(0.01),
                             weight_decay=self.weight_decay, quantization=self.quantization,
                             **options)

    def _unit(self, name, depth, kernel, stride=1, *, separable=False, gated=False):
        """slim's conv3d_spatiotemporal, then self-gating where it applies, under `name`."""
        depth = self._depth(depth)
        frames, height, width = kernel
        stride = (stride,) * 3 if isinstance(stride, int) else tuple(stride)
        if separable and frames != 1:
            parts = [self._conv('', depth, (1, height, width), (1, *stride[1:])),
                     layers.Conv3D('temporal', depth, (frames, 1, 1),
                                   stride=(stride[0], 1, 1),
                                   weights_initializer=center_initializer(),
                                   weight_decay=self.weight_decay,
                                   quantization=self.quantization)]
        else:
            parts = [self._conv('', depth, kernel, stride)]
        if gated:
            parts.append(SelfGating(depth, self.weight_decay, self.quantization))
        return layers.Sequential(name, parts)

    def _block(self, name, *, depth_0, reduce_1, depth_1, reduce_2, depth_2,
               pool_projection, frames, gated):
        """slim's inception_block_v1_3d; gating ends each branch."""
        separable = self.config.separable
        return inception_blocks.Mixed(name, [
            layers.Sequential('Branch_0', [
                self._unit('Conv2d_0a_1x1', depth_0, (1, 1, 1), gated=gated)]),
            layers.Sequential('Branch_1', [
                self._unit('Conv2d_0a_1x1', reduce_1, (1, 1, 1)),
                self._unit('Conv2d_0b_3x3', depth_1, (frames, 3, 3), separable=separable,
                           gated=gated)]),
            layers.Sequential('Branch_2', [
                self._unit('Conv2d_0a_1x1', reduce_2, (1, 1, 1)),
                self._unit('Conv2d_0b_3x3', depth_2, (frames, 3, 3), separable=separable,
                           gated=gated)]),
            layers.Sequential('Branch_3', [
                inception_blocks.Pool(layers.max_pool, 3, 1, 'SAME'),
                self._unit('Conv2d_0b_1x1', pool_projection, (1, 1, 1), gated=gated)]),
        ])

    def forward_base(self, images, *, final_endpoint, training):
        if images.shape.rank != 5:
            raise ValueError('Video nets take clips [batch, frames, height, width, '
                             f'channels]; got a tensor of shape {images.shape}.')
        return inception_blocks.forward_through(self.end_point_layers, images,
                                                final_endpoint=final_endpoint,
                                                training=training)

    def forward(self, images, *, training, random_generator=None):
        net, end_points = self.forward_base(images, final_endpoint='Mixed_5c',
                                            training=training)
        output = heads.conv_classifier(
            net, self._clip_logits if self.logits is not None else None, end_points,
            pool=_final_pool, dropout_keep_prob=self.dropout_keep_prob, training=training,
            random_generator=random_generator, spatial_squeeze=self.spatial_squeeze)
        if not self.num_classes:
            # What the logits' temporal average sees, as the 1x1x1 conv is linear.
            return tf.reduce_mean(output, axis=1), end_points
        return output, end_points

    def _clip_logits(self, net, *, training):
        """The 1x1x1 conv's logits per remaining frame, averaged over the frames."""
        return tf.reduce_mean(self.logits(net, training=training), axis=1)


_VIDEO_SPEC = dict(default_image_size=224, preprocessing_name='inception', num_frames=64,
                   batch_norm=BATCH_NORM)


@register_network('i3d', **_VIDEO_SPEC)
def i3d(num_classes=1000, weight_decay=1e-7, is_training=False, **options) -> VideoInception:
    return VideoInception(num_classes, config=I3D, weight_decay=weight_decay,
                          is_training=is_training, **options)


@register_network('s3dg', **_VIDEO_SPEC)
def s3dg(num_classes=1000, weight_decay=1e-7, is_training=False, *,
         first_temporal_kernel_size=S3DG.first_temporal_kernel_size,
         temporal_conv_startat=S3DG.temporal_conv_startat,
         gating_startat=S3DG.gating_startat, **options) -> VideoInception:
    config = dataclasses.replace(S3DG, first_temporal_kernel_size=first_temporal_kernel_size,
                                 temporal_conv_startat=temporal_conv_startat,
                                 gating_startat=gating_startat)
    return VideoInception(num_classes, config=config, weight_decay=weight_decay,
                          is_training=is_training, **options)
