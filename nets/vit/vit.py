"""The registered Vision Transformers: ViT (as timm's `vit_*_patch<p>_224`, the
google-research vision_transformer / AugReg releases) and the DINOv2 encoders (as timm's
`vit_*_patch14_dinov2` and `vit_*_patch14_reg4_dinov2`, facebookresearch/dinov2).

| ours | depth | blocks | heads | patch |
|---|---|---|---|---|
| vit_tiny_16 | 192 | 12 | 3 | 16 |
| vit_small_16, dinov2_small_14[_reg4] | 384 | 12 | 6 | 16, 14 |
| vit_base_16, vit_base_32, dinov2_base_14[_reg4] | 768 | 12 | 12 | 16, 32, 14 |
| vit_large_16, dinov2_large_14[_reg4] | 1024 | 24 | 16 | 16, 14 |

DINOv2 adds a layer scale initialised to 1e-5 on both branches of every block; its
`_reg4` variants have 4 register tokens after the class token, and their position
embedding covers the patches only. DINOv2 was trained at 518 (a 37x37 grid, timm's
default size); ours default to 224 (a 16x16 grid), the size a linear probe or a
fine-tune on this toolkit's data usually runs at: the 518 grid's position embedding is
resampled to it on import.
"""
from nets.registry import register_network
from nets.vit.model import VisionTransformer

# Size -> (depth, blocks, heads), ViT's Table 1 and DeiT's tiny / small.
SIZES = {
    'tiny': (192, 12, 3),
    'small': (384, 12, 6),
    'base': (768, 12, 12),
    'large': (1024, 24, 16),
}
DINOV2_LAYER_SCALE_INIT = 1e-5
DINOV2_REGISTER_TOKENS = 4


def _register(name, size, patch_size, preprocessing_name, **architecture):
    """Registers `name` (also its scope): the ViT of `size` and `patch_size`."""
    depth, num_blocks, num_heads = SIZES[size]

    @register_network(name, default_image_size=224, preprocessing_name=preprocessing_name,
                      drop_path_option='drop_path_rate')
    def build(num_classes=1000, weight_decay=0.0, is_training=False, **options):
        return VisionTransformer(num_classes, patch_size=patch_size, depth=depth,
                                 num_blocks=num_blocks, num_heads=num_heads, scope=name,
                                 weight_decay=weight_decay, is_training=is_training,
                                 **architecture, **options)

    build.__name__ = build.__qualname__ = name
    return build


DINOV2 = dict(layer_scale_init=DINOV2_LAYER_SCALE_INIT)
# With registers: the position embedding covers the patches only.
DINOV2_REG4 = dict(DINOV2, num_register_tokens=DINOV2_REGISTER_TOKENS,
                   embed_prefix_tokens=False)


vit_tiny_16 = _register('vit_tiny_16', 'tiny', 16, 'vit')
vit_small_16 = _register('vit_small_16', 'small', 16, 'vit')
vit_base_16 = _register('vit_base_16', 'base', 16, 'vit')
vit_base_32 = _register('vit_base_32', 'base', 32, 'vit')
vit_large_16 = _register('vit_large_16', 'large', 16, 'vit')
dinov2_small_14 = _register('dinov2_small_14', 'small', 14, 'dinov2', **DINOV2)
dinov2_base_14 = _register('dinov2_base_14', 'base', 14, 'dinov2', **DINOV2)
dinov2_large_14 = _register('dinov2_large_14', 'large', 14, 'dinov2', **DINOV2)
dinov2_small_14_reg4 = _register('dinov2_small_14_reg4', 'small', 14, 'dinov2', **DINOV2_REG4)
dinov2_base_14_reg4 = _register('dinov2_base_14_reg4', 'base', 14, 'dinov2', **DINOV2_REG4)
dinov2_large_14_reg4 = _register('dinov2_large_14_reg4', 'large', 14, 'dinov2',
                                 **DINOV2_REG4)
