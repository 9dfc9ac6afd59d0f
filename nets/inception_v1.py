"""Inception v1 (GoogLeNet) as in TF-Slim (Szegedy et al. 2014, arXiv 1409.4842): a
7x7/3x3 stem, nine Inception blocks of four branches (1x1; 1x1 then 3x3; 1x1 then 3x3;
3x3 max pool then 1x1) described as data below, a 7x7 average pool and a 1x1-conv
classifier. Every conv is batch-normalised (slim's inception_arg_scope). The skeleton,
`StemAndBlocksNet`, is shared with Inception v2 (nets/inception_blocks.py).

slim's quirks kept: Mixed_5b's third branch names its 3x3 conv 'Conv2d_0a_3x3'; the
base's convs start from a truncated normal of stddev 0.01, the logits from slim's
variance scaling; the final pool is a fixed 7x7 VALID window at stride 1 (inputs
smaller than 224 need `global_pool=True` to classify).
"""
import tensorflow as tf

from nets import inception_blocks, layers
from nets.inception_blocks import BATCH_NORM, StemAndBlocksNet
from nets.registry import register_network


def _mixed(depth_1x1, reduce_3x3, depth_3x3, reduce_5x5, depth_5x5, pool_projection,
           third_branch_3x3='Conv2d_0b_3x3'):
    """A GoogLeNet block; slim replaced the paper's 5x5 by a 3x3, hence the names."""
    return [
        [('conv', 'Conv2d_0a_1x1', depth_1x1, 1)],
        [('conv', 'Conv2d_0a_1x1', reduce_3x3, 1), ('conv', 'Conv2d_0b_3x3', depth_3x3, 3)],
        [('conv', 'Conv2d_0a_1x1', reduce_5x5, 1), ('conv', third_branch_3x3, depth_5x5, 3)],
        [('max', 'MaxPool_0a_3x3', 3, 1, 'SAME'), ('conv', 'Conv2d_0b_1x1', pool_projection, 1)],
    ]


ROOT_BLOCK = [  # SAME padding throughout
    ('conv', 'Conv2d_1a_7x7', 64, 7, 2, 'SAME'),
    ('max', 'MaxPool_2a_3x3', 3, 2, 'SAME'),
    ('conv', 'Conv2d_2b_1x1', 64, 1, 1, 'SAME'),
    ('conv', 'Conv2d_2c_3x3', 192, 3, 1, 'SAME'),
    ('max', 'MaxPool_3a_3x3', 3, 2, 'SAME'),
]
# (end point, branches) for a block, (end point, layer spec) for a pool between blocks.
BLOCKS = [
    ('Mixed_3b', _mixed(64, 96, 128, 16, 32, 32)),
    ('Mixed_3c', _mixed(128, 128, 192, 32, 96, 64)),
    ('MaxPool_4a_3x3', ('max', 'MaxPool_4a_3x3', 3, 2, 'SAME')),
    ('Mixed_4b', _mixed(192, 96, 208, 16, 48, 64)),
    ('Mixed_4c', _mixed(160, 112, 224, 24, 64, 64)),
    ('Mixed_4d', _mixed(128, 128, 256, 24, 64, 64)),
    ('Mixed_4e', _mixed(112, 144, 288, 32, 64, 64)),
    ('Mixed_4f', _mixed(256, 160, 320, 32, 128, 128)),
    ('MaxPool_5a_2x2', ('max', 'MaxPool_5a_2x2', 2, 2, 'SAME')),
    ('Mixed_5b', _mixed(256, 160, 320, 32, 128, 128, third_branch_3x3='Conv2d_0a_3x3')),
    ('Mixed_5c', _mixed(384, 192, 384, 48, 128, 128)),
]


class InceptionV1(StemAndBlocksNet):

    def __init__(self, num_classes: int = 1000, *, weight_decay: float = 0.00004,
                 is_training: bool = False, dropout_keep_prob: float = 0.8,
                 spatial_squeeze: bool = True, global_pool: bool = False,
                 include_root_block: bool = True, scope: str = 'InceptionV1',
                 batch_norm: layers.BatchNormParams = BATCH_NORM,
                 spec=None, quantization=None):
        super().__init__(num_classes, scope=scope, is_training=is_training,
                         weight_decay=weight_decay, dropout_keep_prob=dropout_keep_prob,
                         spatial_squeeze=spatial_squeeze, global_pool=global_pool,
                         logits_name='Logits/Conv2d_0c_1x1', spec=spec,
                         quantization=quantization)
        self.batch_norm = batch_norm
        root = ROOT_BLOCK if include_root_block else []
        self.end_point_layers += [
            (layer_spec[1], inception_blocks.build_layer(layer_spec, self._conv))
            for layer_spec in root]
        for name, description in BLOCKS:
            layer = (inception_blocks.build_layer(description, self._conv)
                     if isinstance(description, tuple)
                     else inception_blocks.build_mixed(name, description, self._conv))
            self.end_point_layers.append((name, layer))

    def _conv(self, name, depth, kernel, stride=1, padding='SAME'):
        return layers.Conv2D(name, depth, kernel, stride=stride, padding=padding,
                             normalizer=self.batch_norm,
                             weights_initializer=layers.truncated_normal_initializer(0.01),
                             weight_decay=self.weight_decay,
                             quantization=self.quantization)

    def _pool(self, features):
        height, width = features.shape[1:3]
        if (height is not None and height < 7) or (width is not None and width < 7):
            raise ValueError(f"Inception v1's final 7x7 average pool needs a feature map of "
                             f'at least 7x7 (inputs of 224x224 or more), got {height}x{width}; '
                             f'use global_pool=True for smaller inputs.')
        with tf.name_scope('AvgPool_0a_7x7'):
            return 'AvgPool_0a_7x7', layers.avg_pool(features, 7, 1, 'VALID')


@register_network('inception_v1', default_image_size=224, preprocessing_name='inception',
                  checkpoint_num_classes=1001,
                  checkpoint_file='inception_v1_2016_08_28.tar.gz',
                  batch_norm=BATCH_NORM)
def inception_v1(num_classes=1000, weight_decay=0.00004, is_training=False,
                 **options) -> InceptionV1:
    return InceptionV1(num_classes, weight_decay=weight_decay, is_training=is_training,
                       **options)
