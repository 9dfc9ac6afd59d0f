"""MobileNetV3 (Howard et al., "Searching for MobileNetV3", ICCV 2019) and MobileNet-EdgeTPU
as TF-Slim's `nets/mobilenet/mobilenet_v3.py` describes them.

- Large and Small: inverted residuals with 3x3 or 5x5 depthwise kernels, ReLU or
  hard-swish, squeeze-and-excite (factor 4, hard-sigmoid gate) in some blocks; after the
  last block a 1x1 conv, an average pool to 1x1 (its own layer, 'layer_18' / 'layer_14')
  and a 1x1 conv without batch norm (with biases) to 1280 / 1024.
- Minimalistic: the same depths with ReLU, 3x3 kernels and no squeeze-excite.
- EdgeTPU: "fused" blocks (one full 3x3 conv instead of expansion + depthwise) in the
  early layers, ReLU, no squeeze-excite; scope 'MobilenetEdgeTPU'. Its 0.75 variant uses
  finegrain_classification_mode, keeping the last conv at 1280.
"""
import tensorflow as tf

from nets.conv_defs import AvgPoolTo1x1, Conv, ExpandedConv
from nets.mobilenet.conv_blocks import hard_swish
from nets.mobilenet.mobilenet import BATCH_NORM, ConvDefs, MobileNet
from nets.registry import register_network


def _block(expansion, depth, kernel_size, stride=1, activation=tf.nn.relu, **options):
    """slim's `mbv3_op(ef, n, k, s, act)`."""
    return ExpandedConv(depth, expansion=expansion, kernel_size=kernel_size, stride=stride,
                        activation=activation, **options)


def _se_block(expansion, depth, kernel_size, stride=1, activation=tf.nn.relu):
    return _block(expansion, depth, kernel_size, stride, activation, squeeze_excite=True)


def _fused_block(expansion, depth, kernel_size, stride=1):
    return _block(expansion, depth, kernel_size, stride, fused=True)


V3_LARGE = ConvDefs(layers=(
    Conv(16, stride=2, activation=hard_swish),
    _block(1, 16, 3),
    _block(4, 24, 3, 2),
    _block(3, 24, 3),
    _se_block(3, 40, 5, 2),
    _se_block(3, 40, 5),
    _se_block(3, 40, 5),
    _block(6, 80, 3, 2, hard_swish),
    _block(2.5, 80, 3, 1, hard_swish),
    _block(184 / 80, 80, 3, 1, hard_swish),
    _block(184 / 80, 80, 3, 1, hard_swish),
    _se_block(6, 112, 3, 1, hard_swish),
    _se_block(6, 112, 3, 1, hard_swish),
    _se_block(6, 160, 5, 2, hard_swish),
    _se_block(6, 160, 5, 1, hard_swish),
    _se_block(6, 160, 5, 1, hard_swish),
    Conv(960, kernel_size=1, activation=hard_swish),
    AvgPoolTo1x1(7),
    Conv(1280, kernel_size=1, activation=hard_swish, batch_norm=False),
), activation=tf.nn.relu)

V3_LARGE_MINIMALISTIC = ConvDefs(layers=(
    Conv(16, stride=2),
    _block(1, 16, 3),
    _block(4, 24, 3, 2),
    _block(3, 24, 3),
    _block(3, 40, 3, 2),
    _block(3, 40, 3),
    _block(3, 40, 3),
    _block(6, 80, 3, 2),
    _block(2.5, 80, 3),
    _block(184 / 80, 80, 3),
    _block(184 / 80, 80, 3),
    _block(6, 112, 3),
    _block(6, 112, 3),
    _block(6, 160, 3, 2),
    _block(6, 160, 3),
    _block(6, 160, 3),
    Conv(960, kernel_size=1),
    AvgPoolTo1x1(7),
    Conv(1280, kernel_size=1, batch_norm=False),
), activation=tf.nn.relu)

V3_SMALL = ConvDefs(layers=(
    Conv(16, stride=2, activation=hard_swish),
    _se_block(1, 16, 3, 2),
    _block(72 / 16, 24, 3, 2),
    _block(88 / 24, 24, 3),
    _se_block(4, 40, 5, 2, hard_swish),
    _se_block(6, 40, 5, 1, hard_swish),
    _se_block(6, 40, 5, 1, hard_swish),
    _se_block(3, 48, 5, 1, hard_swish),
    _se_block(3, 48, 5, 1, hard_swish),
    _se_block(6, 96, 5, 2, hard_swish),
    _se_block(6, 96, 5, 1, hard_swish),
    _se_block(6, 96, 5, 1, hard_swish),
    Conv(576, kernel_size=1, activation=hard_swish),
    AvgPoolTo1x1(7),
    Conv(1024, kernel_size=1, activation=hard_swish, batch_norm=False),
), activation=tf.nn.relu)

V3_SMALL_MINIMALISTIC = ConvDefs(layers=(
    Conv(16, stride=2),
    _block(1, 16, 3, 2),
    _block(72 / 16, 24, 3, 2),
    _block(88 / 24, 24, 3),
    _block(4, 40, 3, 2),
    _block(6, 40, 3),
    _block(6, 40, 3),
    _block(3, 48, 3),
    _block(3, 48, 3),
    _block(6, 96, 3, 2),
    _block(6, 96, 3),
    _block(6, 96, 3),
    Conv(576, kernel_size=1),
    AvgPoolTo1x1(7),
    Conv(1024, kernel_size=1, batch_norm=False),
), activation=tf.nn.relu)

V3_EDGETPU = ConvDefs(layers=(
    Conv(32, stride=2),
    _fused_block(1, 16, 3),
    _fused_block(8, 32, 3, 2),
    _fused_block(4, 32, 3),
    _fused_block(4, 32, 3),
    _fused_block(4, 32, 3),
    _fused_block(8, 48, 3, 2),
    _fused_block(4, 48, 3),
    _fused_block(4, 48, 3),
    _fused_block(4, 48, 3),
    _block(8, 96, 3, 2),
    _block(4, 96, 3),
    _block(4, 96, 3),
    _block(4, 96, 3),
    _block(8, 96, 3, residual=False),
    _block(4, 96, 3),
    _block(4, 96, 3),
    _block(4, 96, 3),
    _block(8, 160, 5, 2),
    _block(4, 160, 5),
    _block(4, 160, 5),
    _block(4, 160, 5),
    _block(8, 192, 3),
    Conv(1280, kernel_size=1),
), activation=tf.nn.relu)


def mobilenet(num_classes=1001, *, conv_defs=V3_LARGE, scope='MobilenetV3',
              **options) -> MobileNet:
    """slim's `mobilenet_v3.mobilenet`: a V3 description (Large by default)."""
    return MobileNet(conv_defs, num_classes, scope=scope, **options)


def _register(name, conv_defs, checkpoint_file, **defaults):
    """Registers slim's `wrapped_partial(mobilenet, ...)` variant `name`."""

    @register_network(name, default_image_size=224, preprocessing_name='inception',
                      checkpoint_num_classes=1001, checkpoint_file=checkpoint_file,
                      drop_path_option='drop_path_rate', batch_norm=BATCH_NORM)
    def builder(num_classes=1001, weight_decay=0.00004, is_training=False, **options):
        return mobilenet(num_classes, conv_defs=conv_defs, weight_decay=weight_decay,
                         is_training=is_training, **{**defaults, **options})

    builder.__name__ = builder.__qualname__ = name
    return builder


large = _register('mobilenet_v3_large', V3_LARGE, 'v3-large_224_1.0_float.tgz')
small = _register('mobilenet_v3_small', V3_SMALL, 'v3-small_224_1.0_float.tgz')
large_minimalistic = _register('mobilenet_v3_large_minimalistic', V3_LARGE_MINIMALISTIC,
                               'v3-large-minimalistic_224_1.0_float.tgz')
small_minimalistic = _register('mobilenet_v3_small_minimalistic', V3_SMALL_MINIMALISTIC,
                               'v3-small-minimalistic_224_1.0_float.tgz')
edge_tpu = _register('mobilenet_edgetpu', V3_EDGETPU, 'mobilenet_edgetpu_224_1.0.tgz',
                     scope='MobilenetEdgeTPU')
edge_tpu_075 = _register('mobilenet_edgetpu_075', V3_EDGETPU,
                         'mobilenet_edgetpu_224_0.75.tgz', scope='MobilenetEdgeTPU',
                         depth_multiplier=0.75, finegrain_classification_mode=True)
