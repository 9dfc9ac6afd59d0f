"""MobileNet v1 as in TF-Slim (Howard et al. 2017, arXiv 1704.04861): a 3x3 conv, then
13 depthwise-separable convs, each a depthwise 3x3 and a pointwise 1x1, every conv
batch-normalised with ReLU6.

Layers are data (`CONV_DEFS`); `depth_multiplier` thins every layer (never below
`min_depth`); beyond `output_stride` strides turn into atrous rates of the depthwise
convs; `use_explicit_padding` pads as SAME would at stride 1 and convolves VALID, so
outputs do not depend on the input's parity.
"""
import dataclasses
from typing import Optional, Sequence

import tensorflow as tf

from nets import layers
from nets.network import EndPoints, Network
from nets.registry import register_network


@dataclasses.dataclass(frozen=True)
class Conv:
    kernel: int
    stride: int
    depth: int


@dataclasses.dataclass(frozen=True)
class DepthSepConv:
    kernel: int
    stride: int
    depth: int


CONV_DEFS = (
    Conv(3, 2, 32),
    DepthSepConv(3, 1, 64), DepthSepConv(3, 2, 128), DepthSepConv(3, 1, 128),
    DepthSepConv(3, 2, 256), DepthSepConv(3, 1, 256), DepthSepConv(3, 2, 512),
    *[DepthSepConv(3, 1, 512)] * 5,
    DepthSepConv(3, 2, 1024), DepthSepConv(3, 1, 1024),
)

# mobilenet_v1_arg_scope: depthwise weights are not regularised (regularize_depthwise).
BATCH_NORM = layers.BatchNormParams(decay=0.9997, epsilon=0.001, center=True, scale=True)


def _reduced_kernel_size(inputs, kernel_size):
    """The pooling kernel, shrunk to the feature map for small inputs (as slim)."""
    height, width = inputs.shape[1:3]
    if height is None or width is None:
        return kernel_size
    return min(height, kernel_size[0]), min(width, kernel_size[1])


class MobileNetV1(Network):

    default_final_endpoint = 'Conv2d_13_pointwise'

    def __init__(self, num_classes: int = 1000, *, weight_decay: float = 0.00004,
                 is_training: bool = False, dropout_keep_prob: float = 0.999,
                 min_depth: int = 8, depth_multiplier: float = 1.0,
                 conv_defs: Optional[Sequence] = None, output_stride: Optional[int] = None,
                 use_explicit_padding: bool = False, spatial_squeeze: bool = True,
                 global_pool: bool = False, scope: str = 'MobilenetV1'):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training)
        if depth_multiplier <= 0:
            raise ValueError('depth_multiplier is not greater than zero.')
        if output_stride is not None and output_stride not in (8, 16, 32):
            raise ValueError('Only allowed output_stride values are 8, 16, 32.')
        self.dropout_keep_prob = dropout_keep_prob
        self.spatial_squeeze = spatial_squeeze
        self.global_pool = global_pool
        common = dict(activation=tf.nn.relu6, normalizer=BATCH_NORM,
                      weights_initializer=layers.truncated_normal_initializer(0.09))
        padding = 'EXPLICIT' if use_explicit_padding else 'SAME'
        self.blocks = []  # (end point name, layer)
        current_stride, rate = 1, 1
        for index, conv_def in enumerate(conv_defs or CONV_DEFS):
            depth = max(int(conv_def.depth * depth_multiplier), min_depth)
            if output_stride is not None and current_stride == output_stride:
                # Past the output stride: keep the resolution, dilate what follows.
                stride, layer_rate = 1, rate
                rate *= conv_def.stride
            else:
                stride, layer_rate = conv_def.stride, 1
                current_stride *= conv_def.stride
            if isinstance(conv_def, Conv):
                name = f'Conv2d_{index}'
                self.blocks.append((name, layers.Conv2D(
                    name, depth, conv_def.kernel, stride=stride, padding=padding,
                    weight_decay=weight_decay, **common)))
            elif isinstance(conv_def, DepthSepConv):
                name = f'Conv2d_{index}_depthwise'
                self.blocks.append((name, layers.SeparableConv2D(
                    name, None, conv_def.kernel, stride=stride, rate=layer_rate,
                    padding=padding, **common)))
                name = f'Conv2d_{index}_pointwise'
                self.blocks.append((name, layers.Conv2D(
                    name, depth, 1, weight_decay=weight_decay, **common)))
            else:
                raise ValueError(f'Unknown convolution type {type(conv_def).__name__} '
                                 f'for layer {index}.')
        self.logits = (layers.Conv2D(
            'Logits/Conv2d_1c_1x1', num_classes, 1, activation=None,
            weights_initializer=common['weights_initializer'], weight_decay=weight_decay)
            if num_classes else None)

    def forward_base(self, images, *, final_endpoint, training):
        end_points = EndPoints(final_endpoint)
        net = images
        for name, layer in self.blocks:
            net = layer(net, training=training)
            if end_points.add(name, net):
                return net, end_points
        raise end_points.unknown_final_endpoint()

    def forward(self, images, *, training):
        net, end_points = self.forward_base(
            images, final_endpoint=self.blocks[-1][0], training=training)
        if self.global_pool:
            net = end_points['global_pool'] = tf.reduce_mean(
                net, [1, 2], keepdims=True, name='global_pool')
        else:
            net = end_points['AvgPool_1a'] = layers.avg_pool(
                net, _reduced_kernel_size(net, (7, 7)), stride=2)
        if not self.num_classes:
            return net, end_points
        net = layers.dropout(net, self.dropout_keep_prob, training=training)
        logits = self.logits(net, training=training)
        if self.spatial_squeeze:
            logits = tf.squeeze(logits, [1, 2], name='SpatialSqueeze')
        end_points['Logits'] = logits
        end_points['Predictions'] = tf.nn.softmax(logits, name='Predictions')
        return logits, end_points


def _register(name, depth_multiplier, checkpoint_file):
    @register_network(name, default_image_size=224, preprocessing_name='inception',
                      checkpoint_num_classes=1001, checkpoint_file=checkpoint_file)
    def build(num_classes=1000, weight_decay=0.00004, is_training=False, **options):
        options.setdefault('depth_multiplier', depth_multiplier)
        return MobileNetV1(num_classes, weight_decay=weight_decay, is_training=is_training,
                           **options)

    return build


mobilenet_v1 = _register('mobilenet_v1', 1.0, 'mobilenet_v1_1.0_224.tgz')
mobilenet_v1_075 = _register('mobilenet_v1_075', 0.75, 'mobilenet_v1_0.75_224.tgz')
mobilenet_v1_050 = _register('mobilenet_v1_050', 0.50, 'mobilenet_v1_0.5_224.tgz')
mobilenet_v1_025 = _register('mobilenet_v1_025', 0.25, 'mobilenet_v1_0.25_224.tgz')
