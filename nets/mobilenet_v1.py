"""MobileNet v1 as in TF-Slim (Howard et al. 2017, arXiv 1704.04861): a 3x3 conv, then
13 depthwise-separable convs, each a depthwise 3x3 and a pointwise 1x1, every conv
batch-normalised with ReLU6.

Layers are data (`CONV_DEFS`, records of nets/conv_defs.py); `depth_multiplier` thins
every layer (never below `min_depth`); beyond `output_stride` strides turn into atrous
rates of the depthwise convs (nets/atrous.py); `use_explicit_padding` pads as SAME would
at stride 1 and convolves VALID, so outputs do not depend on the input's parity.
"""
from typing import Optional, Sequence

import tensorflow as tf

from nets import heads, layers
from nets.atrous import AtrousSchedule
from nets.conv_defs import Conv, DepthSepConv
from nets.network import EndPoints, Network
from nets.registry import register_network

CONV_DEFS = (
    Conv(32, stride=2),
    DepthSepConv(64), DepthSepConv(128, stride=2), DepthSepConv(128),
    DepthSepConv(256, stride=2), DepthSepConv(256), DepthSepConv(512, stride=2),
    *[DepthSepConv(512)] * 5,
    DepthSepConv(1024, stride=2), DepthSepConv(1024),
)

# mobilenet_v1_arg_scope: depthwise weights are not regularised (regularize_depthwise).
BATCH_NORM = layers.BatchNormParams(decay=0.9997, epsilon=0.001, center=True, scale=True)


class MobileNetV1(Network):

    default_final_endpoint = 'Conv2d_13_pointwise'

    def __init__(self, num_classes: int = 1000, *, weight_decay: float = 0.00004,
                 is_training: bool = False, dropout_keep_prob: float = 0.999,
                 min_depth: int = 8, depth_multiplier: float = 1.0,
                 conv_defs: Optional[Sequence] = None, output_stride: Optional[int] = None,
                 use_explicit_padding: bool = False, spatial_squeeze: bool = True,
                 global_pool: bool = False, scope: str = 'MobilenetV1',
                 batch_norm: layers.BatchNormParams = BATCH_NORM, spec=None,
                 quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        if depth_multiplier <= 0:
            raise ValueError('depth_multiplier is not greater than zero.')
        if output_stride is not None and output_stride not in (8, 16, 32):
            raise ValueError('Only allowed output_stride values are 8, 16, 32.')
        self.dropout_keep_prob = dropout_keep_prob
        self.spatial_squeeze = spatial_squeeze
        self.global_pool = global_pool
        common = dict(activation=tf.nn.relu6, normalizer=batch_norm,
                      weights_initializer=layers.truncated_normal_initializer(0.09),
                      quantization=self.quantization)
        padding = 'EXPLICIT' if use_explicit_padding else 'SAME'
        self.blocks = []  # (end point name, layer)
        # Past output_stride, strides turn into the depthwise convs' rates (nets/atrous.py).
        schedule = AtrousSchedule(output_stride)
        for index, conv_def in enumerate(conv_defs or CONV_DEFS):
            depth = max(int(conv_def.num_outputs * depth_multiplier), min_depth)
            stride, rate = schedule.place(conv_def.stride)
            if isinstance(conv_def, Conv):
                name = f'Conv2d_{index}'
                options = dict(common, activation=conv_def.activation or tf.nn.relu6)
                if not conv_def.batch_norm:
                    options['normalizer'] = None
                self.blocks.append((name, layers.Conv2D(
                    name, depth, conv_def.kernel_size, stride=stride, padding=padding,
                    weight_decay=weight_decay, **options)))
            elif isinstance(conv_def, DepthSepConv):
                name = f'Conv2d_{index}_depthwise'
                self.blocks.append((name, layers.SeparableConv2D(
                    name, None, conv_def.kernel_size, stride=stride, rate=rate,
                    padding=padding, **common)))
                name = f'Conv2d_{index}_pointwise'
                self.blocks.append((name, layers.Conv2D(
                    name, depth, 1, weight_decay=weight_decay, **common)))
            else:
                raise ValueError(f'Unknown convolution type {type(conv_def).__name__} '
                                 f'for layer {index}.')
        self.logits = (layers.Conv2D(
            'Logits/Conv2d_1c_1x1', num_classes, 1, activation=None,
            weights_initializer=common['weights_initializer'], weight_decay=weight_decay,
            quantization=self.quantization)
            if num_classes else None)

    def forward_base(self, images, *, final_endpoint, training):
        end_points = EndPoints(final_endpoint)
        net = images
        for name, layer in self.blocks:
            net = layer(net, training=training)
            if end_points.add(name, net):
                return net, end_points
        raise end_points.unknown_final_endpoint()

    def forward(self, images, *, training, random_generator=None):
        net, end_points = self.forward_base(
            images, final_endpoint=self.blocks[-1][0], training=training)
        output = heads.conv_classifier(
            net, self.logits, end_points, pool=self._final_pool,
            dropout_keep_prob=self.dropout_keep_prob, training=training,
            random_generator=random_generator, spatial_squeeze=self.spatial_squeeze)
        return output, end_points

    def _final_pool(self, features):
        if self.global_pool:
            return 'global_pool', tf.reduce_mean(features, [1, 2], keepdims=True,
                                                 name='global_pool')
        kernel = heads.reduced_kernel_size(features, (7, 7))
        with tf.name_scope('AvgPool_1a'):
            return 'AvgPool_1a', layers.avg_pool(features, kernel, stride=2)


def _register(name, depth_multiplier, checkpoint_file):
    @register_network(name, default_image_size=224, preprocessing_name='inception',
                      checkpoint_num_classes=1001, checkpoint_file=checkpoint_file,
                      batch_norm=BATCH_NORM)
    def build(num_classes=1000, weight_decay=0.00004, is_training=False, **options):
        options.setdefault('depth_multiplier', depth_multiplier)
        return MobileNetV1(num_classes, weight_decay=weight_decay, is_training=is_training,
                           **options)

    return build


mobilenet_v1 = _register('mobilenet_v1', 1.0, 'mobilenet_v1_1.0_224.tgz')
mobilenet_v1_075 = _register('mobilenet_v1_075', 0.75, 'mobilenet_v1_0.75_224.tgz')
mobilenet_v1_050 = _register('mobilenet_v1_050', 0.50, 'mobilenet_v1_0.5_224.tgz')
mobilenet_v1_025 = _register('mobilenet_v1_025', 0.25, 'mobilenet_v1_0.25_224.tgz')
