"""MobileNetV2 (Sandler et al., "MobileNetV2: Inverted Residuals and Linear Bottlenecks",
CVPR 2018) as TF-Slim's `nets/mobilenet/mobilenet_v2.py` describes it: a 3x3 conv, 17
inverted residuals (expansion 6, the first 1) and a 1x1 conv to 1280, ReLU6 throughout.

Registered: 'mobilenet_v2' (1.0), 'mobilenet_v2_140' (depth multiplier 1.4) and
'mobilenet_v2_035' (0.35 with finegrain_classification_mode, so the last layer stays
1280 wide). Scope 'MobilenetV2'.
"""
import tensorflow as tf

from nets.conv_defs import Conv, ExpandedConv
from nets.mobilenet.mobilenet import BATCH_NORM, ConvDefs, MobileNet
from nets.registry import register_network

V2_DEF = ConvDefs(
    layers=(
        Conv(32, stride=2),
        ExpandedConv(16, expansion=1, expansion_divisible_by=1),
        ExpandedConv(24, stride=2),
        ExpandedConv(24),
        ExpandedConv(32, stride=2),
        ExpandedConv(32),
        ExpandedConv(32),
        ExpandedConv(64, stride=2),
        ExpandedConv(64),
        ExpandedConv(64),
        ExpandedConv(64),
        ExpandedConv(96),
        ExpandedConv(96),
        ExpandedConv(96),
        ExpandedConv(160, stride=2),
        ExpandedConv(160),
        ExpandedConv(160),
        ExpandedConv(320),
        Conv(1280, kernel_size=1),
    ),
    activation=tf.nn.relu6,
    finegrain='undo_shrinking',
)


def mobilenet(num_classes=1001, *, conv_defs=V2_DEF, scope='MobilenetV2',
              **options) -> MobileNet:
    """slim's `mobilenet_v2.mobilenet`: the V2 description, any MobileNet option."""
    return MobileNet(conv_defs, num_classes, scope=scope, **options)


_SPEC = dict(default_image_size=224, preprocessing_name='inception',
             checkpoint_num_classes=1001, drop_path_option='drop_path_rate',
             batch_norm=BATCH_NORM)


@register_network('mobilenet_v2', **_SPEC, checkpoint_file='mobilenet_v2_1.0_224.tgz')
def mobilenet_v2(num_classes=1001, weight_decay=0.00004, is_training=False, **options):
    return mobilenet(num_classes, weight_decay=weight_decay, is_training=is_training,
                     **options)


@register_network('mobilenet_v2_140', **_SPEC, checkpoint_file='mobilenet_v2_1.4_224.tgz')
def mobilenet_v2_140(num_classes=1001, weight_decay=0.00004, is_training=False,
                     **options):
    return mobilenet(num_classes, weight_decay=weight_decay, is_training=is_training,
                     **{'depth_multiplier': 1.4, **options})


@register_network('mobilenet_v2_035', **_SPEC, checkpoint_file='mobilenet_v2_0.35_224.tgz')
def mobilenet_v2_035(num_classes=1001, weight_decay=0.00004, is_training=False,
                     **options):
    return mobilenet(num_classes, weight_decay=weight_decay, is_training=is_training,
                     **{'depth_multiplier': 0.35, 'finegrain_classification_mode': True,
                        **options})
