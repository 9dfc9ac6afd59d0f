"""EfficientNet B0-B7 (Tan & Le, "EfficientNet: Rethinking Model Scaling for
Convolutional Neural Networks", ICML 2019, arXiv 1905.11946), as the official TensorFlow
release (tensorflow/tpu `models/official/efficientnet`) builds it, so its checkpoints
restore by name ('efficientnet-b0/blocks_0/se/conv2d/kernel'; nets/efficientnet/model.py).

B0's seven stages of MBConv blocks with swish and squeeze-excite (ratio 0.25 of the
block's input depth); B1-B7 scale its width (depths rounded to multiples of 8, never
more than 10 % down), its depth (repeats rounded up) and the image size, with more
dropout. Batch norm: momentum 0.99 (the kit's decay), epsilon 0.001. Drop-connect 0.2
by default, as the release trains (`--drop_path_rate` sets it; 0 turns it off).
"""
import functools

from nets import layers
from nets.efficientnet import blocks
from nets.efficientnet.blocks import Stage
from nets.efficientnet.model import EfficientNet
from nets.registry import register_network

BATCH_NORM = layers.BatchNormParams(decay=0.99, epsilon=1e-3, center=True, scale=True)

# The release's _DEFAULT_BLOCKS_ARGS ('r1_k3_s11_e1_i32_o16_se0.25', ...).
STAGES = (
    Stage(1, 3, 1, 1, 32, 16, 0.25),
    Stage(2, 3, 2, 6, 16, 24, 0.25),
    Stage(2, 5, 2, 6, 24, 40, 0.25),
    Stage(3, 3, 2, 6, 40, 80, 0.25),
    Stage(3, 5, 1, 6, 80, 112, 0.25),
    Stage(4, 5, 2, 6, 112, 192, 0.25),
    Stage(1, 3, 1, 6, 192, 320, 0.25),
)


def efficientnet(num_classes=1000, *, width: float, depth: float, dropout_rate: float,
                 scope: str, weight_decay=1e-5, is_training=False,
                 batch_norm: layers.BatchNormParams = BATCH_NORM, **options) -> EfficientNet:
    """An EfficientNet of width and depth coefficients `width`, `depth`."""
    options.setdefault('dropout_keep_prob', 1.0 - dropout_rate)
    return EfficientNet(
        num_classes, stages=STAGES, depth=depth, scope=scope, batch_norm=batch_norm,
        round_filters=functools.partial(blocks.round_filters, width=width),
        weight_decay=weight_decay, is_training=is_training, **options)


def _register(name, width, depth, image_size, dropout_rate):
    """Registers `name`, the release's 'efficientnet-b<k>' (also its scope); its
    checkpoint: the release's AutoAugment one (1,000 classes: --labels_offset=1)."""
    scope = name.replace('_', '-')

    @register_network(name, default_image_size=image_size,
                      preprocessing_name='efficientnet', checkpoint_num_classes=1000,
                      checkpoint_file=f'ckptsaug/{scope}.tar.gz',
                      drop_path_option='drop_path_rate', batch_norm=BATCH_NORM)
    def build(num_classes=1000, weight_decay=1e-5, is_training=False, **options):
        return efficientnet(num_classes, width=width, depth=depth, dropout_rate=dropout_rate,
                            scope=scope, weight_decay=weight_decay, is_training=is_training,
                            **options)

    build.__name__ = build.__qualname__ = name
    return build


# (width, depth, resolution, dropout) of the paper and the release.
efficientnet_b0 = _register('efficientnet_b0', 1.0, 1.0, 224, 0.2)
efficientnet_b1 = _register('efficientnet_b1', 1.0, 1.1, 240, 0.2)
efficientnet_b2 = _register('efficientnet_b2', 1.1, 1.2, 260, 0.3)
efficientnet_b3 = _register('efficientnet_b3', 1.2, 1.4, 300, 0.3)
efficientnet_b4 = _register('efficientnet_b4', 1.4, 1.8, 380, 0.4)
efficientnet_b5 = _register('efficientnet_b5', 1.6, 2.2, 456, 0.4)
efficientnet_b6 = _register('efficientnet_b6', 1.8, 2.6, 528, 0.5)
efficientnet_b7 = _register('efficientnet_b7', 2.0, 3.1, 600, 0.5)
