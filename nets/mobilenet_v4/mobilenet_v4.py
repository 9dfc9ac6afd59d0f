"""MobileNetV4 (Qin et al. 2024, "MobileNetV4: Universal Models for the Mobile
Ecosystem", arXiv 2404.10518): `mobilenet_v4_conv_small`, `_conv_medium`,
`_conv_large`, `_hybrid_medium` and `_hybrid_large`, with the block tables of timm's
`mobilenetv4_*` definitions, for which the only released weights were trained.

Every variant: a 3x3 stride-2 stem (32 channels; 24 for the large ones), five stages,
the last a 1x1 conv to 960, then the 1280-wide head (nets/mobilenet_v4/model.py). ReLU,
except GELU (the exact erf form) in `hybrid_large`; the hybrids' UIB and MQA blocks
have a layer scale initialised to 1e-5. Batch norm as timm trains it (PyTorch's
BatchNorm2d: momentum 0.1, i.e. decay 0.9, epsilon 1e-5). Weights start as timm's:
normal of stddev sqrt(2 / fan_out) for convs, uniform +-1 / sqrt(classes) for the
classifier. `weight_decay` (default 0: timm trains with decoupled decay) is an L2 term
on conv and dense weights; `dropout_keep_prob` (default 1.0) applies before the
classifier. Default image size: that of timm's default weights for the variant.

`TIMM_NAMES` pairs our module paths (under the net's scope) with timm's state_dict's.
"""
import functools

import tensorflow as tf

from nets import layers
from nets.mobilenet_v4.blocks import ConvSpec, FusedSpec, MQASpec, UIBSpec
from nets.mobilenet_v4.model import MobileNetV4
from nets.registry import register_network

BATCH_NORM = layers.BatchNormParams(decay=0.9, epsilon=1e-5, center=True, scale=True)
LAYER_SCALE_INIT = 1e-5
FINAL_CONV = ConvSpec(1, 1, 960)


def uib(start_kernel, middle_kernel, stride, expansion, depth, repeats=1):
    """`repeats` UIB blocks (a list, to splice into a stage)."""
    return [UIBSpec(start_kernel, middle_kernel, stride, expansion, depth)] * repeats


def mqa(heads, key_depth, kv_stride, depth):
    return [MQASpec(heads, key_depth, kv_stride, depth)]


CONV_SMALL = (
    [ConvSpec(3, 2, 32), ConvSpec(1, 1, 32)],
    [ConvSpec(3, 2, 96), ConvSpec(1, 1, 64)],
    [*uib(5, 5, 2, 3, 96), *uib(0, 3, 1, 2, 96, repeats=4), *uib(3, 0, 1, 4, 96)],
    [*uib(3, 3, 2, 6, 128), *uib(5, 5, 1, 4, 128), *uib(0, 5, 1, 4, 128),
     *uib(0, 5, 1, 3, 128), *uib(0, 3, 1, 4, 128, repeats=2)],
    [FINAL_CONV],
)
CONV_MEDIUM = (
    [FusedSpec(3, 2, 4, 48)],
    [*uib(3, 5, 2, 4, 80), *uib(3, 3, 1, 2, 80)],
    [*uib(3, 5, 2, 6, 160), *uib(3, 3, 1, 4, 160, repeats=2), *uib(3, 5, 1, 4, 160),
     *uib(3, 3, 1, 4, 160), *uib(3, 0, 1, 4, 160), *uib(0, 0, 1, 2, 160),
     *uib(3, 0, 1, 4, 160)],
    [*uib(5, 5, 2, 6, 256), *uib(5, 5, 1, 4, 256), *uib(3, 5, 1, 4, 256, repeats=2),
     *uib(0, 0, 1, 4, 256), *uib(3, 0, 1, 4, 256), *uib(3, 5, 1, 2, 256),
     *uib(5, 5, 1, 4, 256), *uib(0, 0, 1, 4, 256, repeats=2), *uib(5, 0, 1, 2, 256)],
    [FINAL_CONV],
)
CONV_LARGE = (
    [FusedSpec(3, 2, 4, 48)],
    [*uib(3, 5, 2, 4, 96), *uib(3, 3, 1, 4, 96)],
    [*uib(3, 5, 2, 4, 192), *uib(3, 3, 1, 4, 192, repeats=3), *uib(3, 5, 1, 4, 192),
     *uib(5, 3, 1, 4, 192, repeats=5), *uib(3, 0, 1, 4, 192)],
    [*uib(5, 5, 2, 4, 512), *uib(5, 5, 1, 4, 512, repeats=3), *uib(5, 0, 1, 4, 512),
     *uib(5, 3, 1, 4, 512), *uib(5, 0, 1, 4, 512, repeats=2), *uib(5, 3, 1, 4, 512),
     *uib(5, 5, 1, 4, 512), *uib(5, 0, 1, 4, 512, repeats=3)],
    [FINAL_CONV],
)
HYBRID_MEDIUM = (
    [FusedSpec(3, 2, 4, 48)],
    [*uib(3, 5, 2, 4, 80), *uib(3, 3, 1, 2, 80)],
    [*uib(3, 5, 2, 6, 160), *uib(0, 0, 1, 2, 160), *uib(3, 3, 1, 4, 160),
     *uib(3, 5, 1, 4, 160), *mqa(4, 64, 2, 160), *uib(3, 3, 1, 4, 160),
     *mqa(4, 64, 2, 160), *uib(3, 0, 1, 4, 160), *mqa(4, 64, 2, 160),
     *uib(3, 3, 1, 4, 160), *mqa(4, 64, 2, 160), *uib(3, 0, 1, 4, 160)],
    [*uib(5, 5, 2, 6, 256), *uib(5, 5, 1, 4, 256), *uib(3, 5, 1, 4, 256, repeats=2),
     *uib(0, 0, 1, 2, 256), *uib(3, 5, 1, 2, 256), *uib(0, 0, 1, 2, 256),
     *uib(0, 0, 1, 4, 256), *mqa(4, 64, 1, 256), *uib(3, 0, 1, 4, 256),
     *mqa(4, 64, 1, 256), *uib(5, 5, 1, 4, 256), *mqa(4, 64, 1, 256),
     *uib(5, 0, 1, 4, 256), *mqa(4, 64, 1, 256), *uib(5, 0, 1, 4, 256)],
    [FINAL_CONV],
)
HYBRID_LARGE = (
    [FusedSpec(3, 2, 4, 48)],
    [*uib(3, 5, 2, 4, 96), *uib(3, 3, 1, 4, 96)],
    [*uib(3, 5, 2, 4, 192), *uib(3, 3, 1, 4, 192, repeats=3), *uib(3, 5, 1, 4, 192),
     *uib(5, 3, 1, 4, 192, repeats=2), *mqa(8, 48, 2, 192), *uib(5, 3, 1, 4, 192),
     *mqa(8, 48, 2, 192), *uib(5, 3, 1, 4, 192), *mqa(8, 48, 2, 192),
     *uib(5, 3, 1, 4, 192), *mqa(8, 48, 2, 192), *uib(3, 0, 1, 4, 192)],
    [*uib(5, 5, 2, 4, 512), *uib(5, 5, 1, 4, 512, repeats=3), *uib(5, 0, 1, 4, 512),
     *uib(5, 3, 1, 4, 512),
     *uib(5, 0, 1, 4, 512, repeats=2), *uib(5, 3, 1, 4, 512), *uib(5, 5, 1, 4, 512),
     *mqa(8, 64, 1, 512), *uib(5, 0, 1, 4, 512), *mqa(8, 64, 1, 512),
     *uib(5, 0, 1, 4, 512), *mqa(8, 64, 1, 512), *uib(5, 0, 1, 4, 512),
     *mqa(8, 64, 1, 512), *uib(5, 0, 1, 4, 512)],
    [FINAL_CONV],
)
GELU = functools.partial(tf.nn.gelu, approximate=False)
# Variant -> (block table, stem depth, activation, hybrid, default image size: timm's
# default weights, e.g. mobilenetv4_conv_medium.e500_r256_in1k).
VARIANTS = {
    'conv_small': (CONV_SMALL, 32, tf.nn.relu, False, 224),
    'conv_medium': (CONV_MEDIUM, 32, tf.nn.relu, False, 256),
    'conv_large': (CONV_LARGE, 24, tf.nn.relu, False, 384),
    'hybrid_medium': (HYBRID_MEDIUM, 32, tf.nn.relu, True, 256),
    'hybrid_large': (HYBRID_LARGE, 24, GELU, True, 384),
}
# Our module path -> timm's; <i>, <j> stage and block. A conv's batch norm is
# '<ours>/BatchNorm' -> timm's norm beside it (bn1, bn2 or '<layer>.bn').
TIMM_NAMES = (
    ('stem/conv', 'conv_stem'), ('stem/conv/BatchNorm', 'bn1'),
    ('stage_<i>/block_<j>/conv', 'blocks.<i>.<j>.conv'),
    ('stage_<i>/block_<j>/conv/BatchNorm', 'blocks.<i>.<j>.bn1'),
    ('stage_<i>/block_<j>/expand', 'blocks.<i>.<j>.conv_exp'),
    ('stage_<i>/block_<j>/expand/BatchNorm', 'blocks.<i>.<j>.bn1'),
    ('stage_<i>/block_<j>/project', 'blocks.<i>.<j>.conv_pwl'),
    ('stage_<i>/block_<j>/project/BatchNorm', 'blocks.<i>.<j>.bn2'),
    *((f'stage_<i>/block_<j>/{ours}{part}', f'blocks.<i>.<j>.{timm}.{role}')
      for ours, timm in (('start_depthwise', 'dw_start'), ('expand', 'pw_exp'),
                         ('middle_depthwise', 'dw_mid'), ('project', 'pw_proj'))
      for part, role in (('', 'conv'), ('/BatchNorm', 'bn'))),
    ('stage_<i>/block_<j>/layer_scale', 'blocks.<i>.<j>.layer_scale.gamma'),
    ('stage_<i>/block_<j>/input_norm', 'blocks.<i>.<j>.norm'),
    ('stage_<i>/block_<j>/query', 'blocks.<i>.<j>.attn.query.proj'),
    *((f'stage_<i>/block_<j>/{role}{part}', f'blocks.<i>.<j>.attn.{role}.{timm}')
      for role in ('key', 'value')
      for part, timm in (('_downsample', 'down_conv'), ('_downsample/BatchNorm', 'norm'),
                         ('', 'proj'))),
    ('stage_<i>/block_<j>/output', 'blocks.<i>.<j>.attn.output.proj'),
    ('head/conv', 'conv_head'), ('head/conv/BatchNorm', 'norm_head'),
    ('head/logits', 'classifier'),
)


def _register(name, variant):
    """Registers `name` (also its scope): MobileNetV4 of timm's `variant`."""
    stages, stem_depth, activation, hybrid, image_size = VARIANTS[variant]

    @register_network(name, default_image_size=image_size,
                      preprocessing_name=('mobilenet_v4_conv_small'
                                          if variant == 'conv_small' else 'mobilenet_v4'),
                      drop_path_option='drop_path_rate', batch_norm=BATCH_NORM)
    def build(num_classes=1000, weight_decay=0.0, is_training=False,
              batch_norm=BATCH_NORM, **options):
        return MobileNetV4(num_classes, stages=stages, stem_depth=stem_depth, scope=name,
                           batch_norm=batch_norm, activation=activation,
                           layer_scale_init=LAYER_SCALE_INIT if hybrid else None,
                           weight_decay=weight_decay, is_training=is_training, **options)

    build.__name__ = build.__qualname__ = name
    return build


mobilenet_v4_conv_small = _register('mobilenet_v4_conv_small', 'conv_small')
mobilenet_v4_conv_medium = _register('mobilenet_v4_conv_medium', 'conv_medium')
mobilenet_v4_conv_large = _register('mobilenet_v4_conv_large', 'conv_large')
mobilenet_v4_hybrid_medium = _register('mobilenet_v4_hybrid_medium', 'hybrid_medium')
mobilenet_v4_hybrid_large = _register('mobilenet_v4_hybrid_large', 'hybrid_large')
