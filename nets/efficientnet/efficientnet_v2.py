"""EfficientNetV2 (Tan & Le, "EfficientNetV2: Smaller Models and Faster Training", ICML
2021, arXiv 2104.00298) as the official release (google/automl `efficientnetv2`) builds
it, so its checkpoints restore by name ('efficientnetv2-s/blocks_0/conv2d/kernel';
nets/efficientnet/model.py).

The early stages are fused MBConv blocks (one 3x3 convolution instead of expansion and
depthwise; no squeeze-excite), the later ones MBConv with squeeze-excite 0.25. S, M and L
have tables of their own; B0-B3 scale the base table like EfficientNet B0-B3 (depths
rounded to multiples of 8 without EfficientNet's 10 % rule). Batch norm: momentum 0.9
(the kit's decay), epsilon 0.001. Default image size: the release's evaluation size
(it trains smaller, progressively). Drop-connect 0.2 by default, as the release trains.
"""
import functools

from nets import layers
from nets.efficientnet import blocks
from nets.efficientnet.blocks import Stage
from nets.efficientnet.model import EfficientNet
from nets.registry import register_network

BATCH_NORM = layers.BatchNormParams(decay=0.9, epsilon=1e-3, center=True, scale=True)


def _fused(repeats, stride, expansion, input_filters, output_filters):
    return Stage(repeats, 3, stride, expansion, input_filters, output_filters, fused=True)


def _mbconv(repeats, stride, expansion, input_filters, output_filters):
    return Stage(repeats, 3, stride, expansion, input_filters, output_filters, 0.25)


# The release's block tables (v2_base_block, v2_s_block, v2_m_block, v2_l_block).
BASE_STAGES = (
    _fused(1, 1, 1, 32, 16), _fused(2, 2, 4, 16, 32), _fused(2, 2, 4, 32, 48),
    _mbconv(3, 2, 4, 48, 96), _mbconv(5, 1, 6, 96, 112), _mbconv(8, 2, 6, 112, 192))
S_STAGES = (
    _fused(2, 1, 1, 24, 24), _fused(4, 2, 4, 24, 48), _fused(4, 2, 4, 48, 64),
    _mbconv(6, 2, 4, 64, 128), _mbconv(9, 1, 6, 128, 160), _mbconv(15, 2, 6, 160, 256))
M_STAGES = (
    _fused(3, 1, 1, 24, 24), _fused(5, 2, 4, 24, 48), _fused(5, 2, 4, 48, 80),
    _mbconv(7, 2, 4, 80, 160), _mbconv(14, 1, 6, 160, 176), _mbconv(18, 2, 6, 176, 304),
    _mbconv(5, 1, 6, 304, 512))
L_STAGES = (
    _fused(4, 1, 1, 32, 32), _fused(7, 2, 4, 32, 64), _fused(7, 2, 4, 64, 96),
    _mbconv(10, 2, 4, 96, 192), _mbconv(19, 1, 6, 192, 224), _mbconv(25, 2, 6, 224, 384),
    _mbconv(7, 1, 6, 384, 640))


def efficientnet_v2(num_classes=1000, *, stages, width: float, depth: float,
                    dropout_rate: float, scope: str, weight_decay=1e-5, is_training=False,
                    batch_norm: layers.BatchNormParams = BATCH_NORM,
                    **options) -> EfficientNet:
    """An EfficientNetV2 of block table `stages`, width and depth coefficients."""
    options.setdefault('dropout_keep_prob', 1.0 - dropout_rate)
    return EfficientNet(
        num_classes, stages=stages, depth=depth, scope=scope, batch_norm=batch_norm,
        round_filters=functools.partial(blocks.round_filters, width=width,
                                        keep_within_ten_percent=False),
        weight_decay=weight_decay, decay_biases=False, is_training=is_training, **options)


def _register(name, stages, width, depth, image_size, dropout_rate):
    """Registers `name`, the release's 'efficientnetv2-<variant>' (also its scope); its
    checkpoint: the release's ImageNet one (1,000 classes: --labels_offset=1). B0-B3
    train and evaluate with EfficientNet's preprocessing, S, M and L with their own."""
    scope = 'efficientnetv2-' + name.rsplit('_', 1)[1]
    preprocessing = 'efficientnet' if stages is BASE_STAGES else 'efficientnet_v2'

    @register_network(name, default_image_size=image_size,
                      preprocessing_name=preprocessing, checkpoint_num_classes=1000,
                      checkpoint_file=f'{scope}.tgz', drop_path_option='drop_path_rate',
                      batch_norm=BATCH_NORM)
    def build(num_classes=1000, weight_decay=1e-5, is_training=False, **options):
        return efficientnet_v2(num_classes, stages=stages, width=width, depth=depth,
                               dropout_rate=dropout_rate, scope=scope,
                               weight_decay=weight_decay, is_training=is_training, **options)

    build.__name__ = build.__qualname__ = name
    return build


# (table, width, depth, evaluation size, dropout) of the release.
efficientnet_v2_b0 = _register('efficientnet_v2_b0', BASE_STAGES, 1.0, 1.0, 224, 0.2)
efficientnet_v2_b1 = _register('efficientnet_v2_b1', BASE_STAGES, 1.0, 1.1, 240, 0.2)
efficientnet_v2_b2 = _register('efficientnet_v2_b2', BASE_STAGES, 1.1, 1.2, 260, 0.3)
efficientnet_v2_b3 = _register('efficientnet_v2_b3', BASE_STAGES, 1.2, 1.4, 300, 0.3)
efficientnet_v2_s = _register('efficientnet_v2_s', S_STAGES, 1.0, 1.0, 384, 0.2)
efficientnet_v2_m = _register('efficientnet_v2_m', M_STAGES, 1.0, 1.0, 480, 0.3)
efficientnet_v2_l = _register('efficientnet_v2_l', L_STAGES, 1.0, 1.0, 480, 0.4)
