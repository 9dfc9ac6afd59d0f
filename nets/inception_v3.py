"""Inception v3 as in TF-Slim (Szegedy et al. 2015, arXiv 1512.00567): a VALID stem
(`STEM_299`, shared with Inception-ResNet-v2), then eleven Inception blocks whose
branches are described as data below, an auxiliary head on Mixed_6e (built in both
modes, as slim) and a 1x1-conv classifier.

slim's quirks kept: Mixed_5c's second branch is named 'Conv_1_0c_5x5'; the pooling
kernels (final and auxiliary) shrink to the feature map for small inputs and the layer
names follow the shrunk size ('AvgPool_1a_3x3', 'Conv2d_2a_3x3').
"""
from typing import Optional

import tensorflow as tf

from nets import heads, inception_blocks, layers
from nets.heads import reduced_kernel_size
from nets.inception_blocks import BATCH_NORM, STEM_299
from nets.network import Network
from nets.registry import register_network


# --- Block descriptions (nets/inception_blocks.py): per block, its branches. ---

def _avg_branch(depth):
    return [('avg', 'AvgPool_0a_3x3', 3, 1, 'SAME'), ('conv', 'Conv2d_0b_1x1', depth, 1)]


def _mixed_5(pool_depth, second_name='Conv2d_0b_5x5', first_name='Conv2d_0a_1x1'):
    return [
        [('conv', 'Conv2d_0a_1x1', 64, 1)],
        [('conv', first_name, 48, 1), ('conv', second_name, 64, 5)],
        [('conv', 'Conv2d_0a_1x1', 64, 1), ('conv', 'Conv2d_0b_3x3', 96, 3),
         ('conv', 'Conv2d_0c_3x3', 96, 3)],
        _avg_branch(pool_depth),
    ]


def _mixed_6(middle):
    return [
        [('conv', 'Conv2d_0a_1x1', 192, 1)],
        [('conv', 'Conv2d_0a_1x1', middle, 1), ('conv', 'Conv2d_0b_1x7', middle, [1, 7]),
         ('conv', 'Conv2d_0c_7x1', 192, [7, 1])],
        [('conv', 'Conv2d_0a_1x1', middle, 1), ('conv', 'Conv2d_0b_7x1', middle, [7, 1]),
         ('conv', 'Conv2d_0c_1x7', middle, [1, 7]), ('conv', 'Conv2d_0d_7x1', middle, [7, 1]),
         ('conv', 'Conv2d_0e_1x7', 192, [1, 7])],
        _avg_branch(192),
    ]


def _mixed_7(second_3x1):
    return [
        [('conv', 'Conv2d_0a_1x1', 320, 1)],
        [('conv', 'Conv2d_0a_1x1', 384, 1),
         ('fork', [('Conv2d_0b_1x3', 384, [1, 3]), (second_3x1, 384, [3, 1])])],
        [('conv', 'Conv2d_0a_1x1', 448, 1), ('conv', 'Conv2d_0b_3x3', 384, 3),
         ('fork', [('Conv2d_0c_1x3', 384, [1, 3]), ('Conv2d_0d_3x1', 384, [3, 1])])],
        _avg_branch(192),
    ]


BLOCKS = [
    ('Mixed_5b', _mixed_5(32)),
    ('Mixed_5c', _mixed_5(64, second_name='Conv_1_0c_5x5', first_name='Conv2d_0b_1x1')),
    ('Mixed_5d', _mixed_5(64)),
    ('Mixed_6a', [
        [('conv', 'Conv2d_1a_1x1', 384, 3, 2, 'VALID')],
        [('conv', 'Conv2d_0a_1x1', 64, 1), ('conv', 'Conv2d_0b_3x3', 96, 3),
         ('conv', 'Conv2d_1a_1x1', 96, 3, 2, 'VALID')],
        [('max', 'MaxPool_1a_3x3', 3, 2, 'VALID')]]),
    ('Mixed_6b', _mixed_6(128)),
    ('Mixed_6c', _mixed_6(160)),
    ('Mixed_6d', _mixed_6(160)),
    ('Mixed_6e', _mixed_6(192)),
    ('Mixed_7a', [
        [('conv', 'Conv2d_0a_1x1', 192, 1), ('conv', 'Conv2d_1a_3x3', 320, 3, 2, 'VALID')],
        [('conv', 'Conv2d_0a_1x1', 192, 1), ('conv', 'Conv2d_0b_1x7', 192, [1, 7]),
         ('conv', 'Conv2d_0c_7x1', 192, [7, 1]),
         ('conv', 'Conv2d_1a_3x3', 192, 3, 2, 'VALID')],
        [('max', 'MaxPool_1a_3x3', 3, 2, 'VALID')]]),
    ('Mixed_7b', _mixed_7('Conv2d_0b_3x1')),
    ('Mixed_7c', _mixed_7('Conv2d_0c_3x1')),
]


class InceptionV3(Network):

    default_final_endpoint = 'Mixed_7c'

    def __init__(self, num_classes: int = 1000, *, weight_decay: float = 0.00004,
                 is_training: bool = False, dropout_keep_prob: float = 0.8,
                 min_depth: int = 16, depth_multiplier: float = 1.0,
                 spatial_squeeze: bool = True, create_aux_logits: bool = True,
                 global_pool: bool = False, scope: str = 'InceptionV3',
                 batch_norm: layers.BatchNormParams = BATCH_NORM, spec=None,
                 quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        self.batch_norm = batch_norm
        if depth_multiplier <= 0:
            raise ValueError('depth_multiplier is not greater than zero.')
        self.dropout_keep_prob = dropout_keep_prob
        self.spatial_squeeze = spatial_squeeze
        self.global_pool = global_pool
        self.weight_decay = weight_decay
        self._depth = lambda d: max(int(d * depth_multiplier), min_depth)
        self.stem = [(layer_spec[1],
                      inception_blocks.build_layer(layer_spec, self._conv, 'VALID'))
                     for layer_spec in STEM_299]
        self.blocks = [(name, inception_blocks.build_mixed(name, branches, self._conv))
                       for name, branches in BLOCKS]
        self.aux_conv_1b = self.aux_logits = self.logits = None
        if num_classes:
            if create_aux_logits:
                self.aux_conv_1b = self._conv('AuxLogits/Conv2d_1b_1x1', 128, 1)
                self.aux_logits = layers.Conv2D(
                    'AuxLogits/Conv2d_2b_1x1', num_classes, 1, activation=None,
                    weights_initializer=layers.truncated_normal_initializer(0.001),
                    weight_decay=weight_decay, quantization=self.quantization)
                self._aux_conv_2a = {}  # by the (input-dependent) kernel size
            self.logits = layers.Conv2D(
                'Logits/Conv2d_1c_1x1', num_classes, 1, activation=None,
                weights_initializer=layers.variance_scaling_initializer(),
                weight_decay=weight_decay, quantization=self.quantization)

    def _conv(self, name, depth, kernel, stride=1, padding='SAME', **options):
        options.setdefault('weights_initializer', layers.variance_scaling_initializer())
        return layers.Conv2D(name, self._depth(depth), kernel, stride=stride,
                             padding=padding, normalizer=self.batch_norm,
                             weight_decay=self.weight_decay, quantization=self.quantization,
                             **options)

    def forward_base(self, images, *, final_endpoint, training):
        return inception_blocks.forward_through(self.stem + self.blocks, images,
                                                final_endpoint=final_endpoint,
                                                training=training)

    def _aux_head(self, mixed_6e, training):
        net = layers.avg_pool(mixed_6e, 5, 3, 'VALID')
        net = self.aux_conv_1b(net, training=training)
        kernel = reduced_kernel_size(net, [5, 5])
        key = f'{kernel[0]}x{kernel[1]}'
        if key not in self._aux_conv_2a:
            conv = self._conv(f'AuxLogits/Conv2d_2a_{key}', 768, kernel,
                              padding='VALID',
                              weights_initializer=layers.truncated_normal_initializer(0.01))
            conv.resolve_scopes(self.scope)
            self._aux_conv_2a[key] = conv
        net = self._aux_conv_2a[key](net, training=training)
        logits = self.aux_logits(net, training=training)
        return tf.squeeze(logits, [1, 2], name='SpatialSqueeze') if self.spatial_squeeze \
            else logits

    def forward(self, images, *, training, random_generator=None):
        net, end_points = self.forward_base(images, final_endpoint='Mixed_7c',
                                            training=training)
        if self.aux_logits is not None:
            end_points['AuxLogits'] = self._aux_head(end_points['Mixed_6e'], training)
        output = heads.conv_classifier(
            net, self.logits, end_points, pool=self._final_pool,
            dropout_keep_prob=self.dropout_keep_prob, training=training,
            random_generator=random_generator, spatial_squeeze=self.spatial_squeeze,
            pre_logits=True)
        return output, end_points

    def _final_pool(self, features):
        if self.global_pool:
            return 'global_pool', tf.reduce_mean(features, [1, 2], keepdims=True,
                                                 name='GlobalPool')
        kernel = reduced_kernel_size(features, [8, 8])
        with tf.name_scope('AvgPool_1a_{}x{}'.format(*kernel)):  # slim's stride: 2
            return 'AvgPool_1a', layers.avg_pool(features, kernel, 2, 'VALID')


@register_network('inception_v3', default_image_size=299, preprocessing_name='inception',
                  checkpoint_num_classes=1001,
                  checkpoint_file='inception_v3_2016_08_28.tar.gz',
                  batch_norm=BATCH_NORM)
def inception_v3(num_classes=1000, weight_decay=0.00004, is_training=False,
                 **options) -> Optional[InceptionV3]:
    return InceptionV3(num_classes, weight_decay=weight_decay, is_training=is_training,
                       **options)
