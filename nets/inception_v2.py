"""Inception v2 (BN-Inception) as in TF-Slim (Ioffe and Szegedy 2015, arXiv 1502.03167):
Inception v1's skeleton (`StemAndBlocksNet`, nets/inception_blocks.py) with a separable
7x7 first layer, blocks whose 5x5 branch is two 3x3 convs, strided reduction blocks
(Mixed_4a, Mixed_5a) and batch norm on every other conv. `depth_multiplier` thins every
conv (never below `min_depth`).

slim's quirks kept:
- the first layer, Conv2d_1a_7x7, is a separable conv with biases and no batch norm or
  weight decay (slim's inception_arg_scope covers conv2d only); its depthwise multiplier
  is min(depth(64) // 3, 8); `use_separable_conv=False` makes it a plain conv (batch
  norm, weight decay);
- Mixed_5c pools its fourth branch with a max pool where the other blocks average;
- truncated-normal initialisers: stddev 1.0 for the first layer, 0.1 for a 1x1 conv
  after a pool, 0.09 for a 1x1 reduction feeding another conv; slim's variance scaling
  elsewhere;
- the final average pool (stride 2, slim's default) shrinks its 7x7 kernel to the
  feature map for small inputs, and its op is named after the shrunk size
  ('Logits/AvgPool_1a_4x4').
slim's data_format='NCHW' is not supported.
"""
import functools

import tensorflow as tf

from nets import inception_blocks, layers
from nets.heads import reduced_kernel_size
from nets.inception_blocks import BATCH_NORM, StemAndBlocksNet
from nets.registry import register_network


def _mixed(depth_1x1, reduce_3x3, depth_3x3, reduce_double_3x3, depth_double_3x3,
           pool_projection, pool='avg'):
    pool_name = 'AvgPool_0a_3x3' if pool == 'avg' else 'MaxPool_0a_3x3'
    return [
        [('conv', 'Conv2d_0a_1x1', depth_1x1, 1)],
        [('conv', 'Conv2d_0a_1x1', reduce_3x3, 1), ('conv', 'Conv2d_0b_3x3', depth_3x3, 3)],
        [('conv', 'Conv2d_0a_1x1', reduce_double_3x3, 1),
         ('conv', 'Conv2d_0b_3x3', depth_double_3x3, 3),
         ('conv', 'Conv2d_0c_3x3', depth_double_3x3, 3)],
        [(pool, pool_name, 3, 1, 'SAME'), ('conv', 'Conv2d_0b_1x1', pool_projection, 1)],
    ]


def _reduction(reduce_3x3, depth_3x3, reduce_double_3x3, depth_double_3x3):
    """A block that halves the map: strided 3x3 and double 3x3, and a strided max pool."""
    return [
        [('conv', 'Conv2d_0a_1x1', reduce_3x3, 1),
         ('conv', 'Conv2d_1a_3x3', depth_3x3, 3, 2, 'SAME')],
        [('conv', 'Conv2d_0a_1x1', reduce_double_3x3, 1),
         ('conv', 'Conv2d_0b_3x3', depth_double_3x3, 3),
         ('conv', 'Conv2d_1a_3x3', depth_double_3x3, 3, 2, 'SAME')],
        [('max', 'MaxPool_1a_3x3', 3, 2, 'SAME')],
    ]


FIRST_LAYER = ('Conv2d_1a_7x7', 64, 7, 2)  # name, depth, kernel, stride; see _first_layer
ROOT_BLOCK = [
    ('max', 'MaxPool_2a_3x3', 3, 2, 'SAME'),
    ('conv', 'Conv2d_2b_1x1', 64, 1, 1, 'SAME'),
    ('conv', 'Conv2d_2c_3x3', 192, 3, 1, 'SAME'),
    ('max', 'MaxPool_3a_3x3', 3, 2, 'SAME'),
]
BLOCKS = [
    ('Mixed_3b', _mixed(64, 64, 64, 64, 96, 32)),
    ('Mixed_3c', _mixed(64, 64, 96, 64, 96, 64)),
    ('Mixed_4a', _reduction(128, 160, 64, 96)),
    ('Mixed_4b', _mixed(224, 64, 96, 96, 128, 128)),
    ('Mixed_4c', _mixed(192, 96, 128, 96, 128, 128)),
    ('Mixed_4d', _mixed(160, 128, 160, 128, 160, 96)),
    ('Mixed_4e', _mixed(96, 128, 192, 160, 192, 96)),
    ('Mixed_5a', _reduction(128, 192, 192, 256)),
    ('Mixed_5b', _mixed(352, 192, 320, 160, 224, 128)),
    ('Mixed_5c', _mixed(352, 192, 320, 192, 224, 128, pool='max')),
]


def _initializer_stddevs(sequence):
    """Per layer spec of a branch (or the root block), slim's truncated-normal stddev for
    a conv, or None for variance scaling (see the module docstring)."""
    stddevs = []
    for i, spec in enumerate(sequence):
        if spec[0] != 'conv':
            stddevs.append(None)
        elif i > 0 and sequence[i - 1][0] in ('avg', 'max'):
            stddevs.append(0.1)
        elif spec[3] == 1 and i + 1 < len(sequence):
            stddevs.append(0.09)
        else:
            stddevs.append(None)
    return stddevs


class InceptionV2(StemAndBlocksNet):

    pre_logits_endpoint = True

    def __init__(self, num_classes: int = 1000, *, weight_decay: float = 0.00004,
                 is_training: bool = False, dropout_keep_prob: float = 0.8,
                 min_depth: int = 16, depth_multiplier: float = 1.0,
                 spatial_squeeze: bool = True, global_pool: bool = False,
                 use_separable_conv: bool = True, include_root_block: bool = True,
                 data_format: str = 'NHWC', scope: str = 'InceptionV2',
                 batch_norm: layers.BatchNormParams = BATCH_NORM, spec=None,
                 quantization=None):
        super().__init__(num_classes, scope=scope, is_training=is_training,
                         weight_decay=weight_decay, dropout_keep_prob=dropout_keep_prob,
                         spatial_squeeze=spatial_squeeze, global_pool=global_pool,
                         logits_name='Logits/Conv2d_1c_1x1', spec=spec,
                         quantization=quantization)
        self.batch_norm = batch_norm
        if depth_multiplier <= 0:
            raise ValueError('depth_multiplier is not greater than zero.')
        if data_format != 'NHWC':
            raise ValueError(f"data_format must be 'NHWC' (slim's 'NCHW' is not supported), "
                             f"got {data_format!r}.")
        self._depth = lambda d: max(int(d * depth_multiplier), min_depth)
        if include_root_block:
            self.end_point_layers.append(
                (FIRST_LAYER[0], self._first_layer(*FIRST_LAYER, use_separable_conv)))
            self.end_point_layers += [
                (layer_spec[1], inception_blocks.build_layer(layer_spec,
                                                             self._conv_with(stddev)))
                for layer_spec, stddev in zip(ROOT_BLOCK, _initializer_stddevs(ROOT_BLOCK))]
        self.end_point_layers += [(name, self._block(name, branches))
                                  for name, branches in BLOCKS]

    def _conv(self, name, depth, kernel, stride=1, padding='SAME', *, stddev=None):
        initializer = (layers.variance_scaling_initializer() if stddev is None
                       else layers.truncated_normal_initializer(stddev))
        return layers.Conv2D(name, self._depth(depth), kernel, stride=stride,
                             padding=padding, normalizer=self.batch_norm,
                             weights_initializer=initializer, weight_decay=self.weight_decay,
                             quantization=self.quantization)

    def _conv_with(self, stddev):
        return functools.partial(self._conv, stddev=stddev)

    def _first_layer(self, name, depth, kernel, stride, use_separable_conv):
        if not use_separable_conv:
            return self._conv(name, depth, kernel, stride, stddev=1.0)
        # The depthwise multiplier keeps 3 * multiplier <= the pointwise output depth.
        return layers.SeparableConv2D(
            name, self._depth(depth), kernel, stride=stride,
            depth_multiplier=min(self._depth(depth) // 3, 8),
            weights_initializer=layers.truncated_normal_initializer(1.0),
            quantization=self.quantization)

    def _block(self, name, branches):
        """inception_blocks.build_mixed, with each conv's initialiser (slim's stddevs)."""
        return inception_blocks.Mixed(name, [
            layers.Sequential(f'Branch_{i}', [
                inception_blocks.build_layer(spec, self._conv_with(stddev))
                for spec, stddev in zip(branch, _initializer_stddevs(branch))])
            for i, branch in enumerate(branches)])

    def _pool(self, features):
        kernel = reduced_kernel_size(features, [7, 7])
        with tf.name_scope('AvgPool_1a_{}x{}'.format(*kernel)):
            return 'AvgPool_1a', layers.avg_pool(features, kernel, 2, 'VALID')


@register_network('inception_v2', default_image_size=224, preprocessing_name='inception',
                  checkpoint_num_classes=1001,
                  checkpoint_file='inception_v2_2016_08_28.tar.gz',
                  batch_norm=BATCH_NORM)
def inception_v2(num_classes=1000, weight_decay=0.00004, is_training=False,
                 **options) -> InceptionV2:
    return InceptionV2(num_classes, weight_decay=weight_decay, is_training=is_training,
                       **options)
