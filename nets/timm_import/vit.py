"""timm's VisionTransformer into ours (nets/vit): `vit_*_patch16_224`,
`vit_base_patch32_224`, DeiT's (same architecture), `vit_*_patch14_dinov2` and
`vit_*_patch14_reg4_dinov2`. The fused qkv stays fused (ours keeps timm's [q | k | v]
layout); `pos_embed` of another grid (DINOv2's 37x37 at 518) is resampled to ours."""
from nets.timm_import.mapping import TimmFamily

FAMILY = TimmFamily(
    architectures={
        'vit_tiny_16': ('vit_tiny_patch16_224', 'vit_tiny_patch16_384',
                        'deit_tiny_patch16_224'),
        'vit_small_16': ('vit_small_patch16_224', 'vit_small_patch16_384',
                         'deit_small_patch16_224'),
        'vit_base_16': ('vit_base_patch16_224', 'vit_base_patch16_384',
                        'deit_base_patch16_224', 'deit_base_patch16_384'),
        'vit_base_32': ('vit_base_patch32_224', 'vit_base_patch32_384'),
        'vit_large_16': ('vit_large_patch16_224', 'vit_large_patch16_384'),
        'dinov2_small_14': ('vit_small_patch14_dinov2',),
        'dinov2_base_14': ('vit_base_patch14_dinov2',),
        'dinov2_large_14': ('vit_large_patch14_dinov2',),
        'dinov2_small_14_reg4': ('vit_small_patch14_reg4_dinov2',),
        'dinov2_base_14_reg4': ('vit_base_patch14_reg4_dinov2',),
        'dinov2_large_14_reg4': ('vit_large_patch14_reg4_dinov2',),
    },
    names=(
        ('class_token', 'cls_token'),
        ('register_tokens', 'reg_token'),
        ('position_embedding', 'pos_embed'),
        ('patch_embedding/conv', 'patch_embed.proj'),
        ('block_<i>/layer_norm_1', 'blocks.<i>.norm1'),
        ('block_<i>/attention/qkv', 'blocks.<i>.attn.qkv'),
        ('block_<i>/attention/projection', 'blocks.<i>.attn.proj'),
        ('block_<i>/layer_scale_1', 'blocks.<i>.ls1.gamma'),
        ('block_<i>/layer_norm_2', 'blocks.<i>.norm2'),
        ('block_<i>/mlp/fc_1', 'blocks.<i>.mlp.fc1'),
        ('block_<i>/mlp/fc_2', 'blocks.<i>.mlp.fc2'),
        ('block_<i>/layer_scale_2', 'blocks.<i>.ls2.gamma'),
        ('final_norm', 'norm'),
        ('head/logits', 'head'),
    ),
    classifier='head',
    ignored=('mask_token',),  # DINOv2's masked-image training only
)
