"""ConvNeXt V2 (Woo et al. 2023, "ConvNeXt V2: Co-designing and Scaling ConvNets with
Masked Autoencoders", arXiv 2301.00808) on ConvNeXt's stem, stages and head
(nets/convnext.py).

The block is ConvNeXt's with a global response norm (layers.GlobalResponseNorm) after
the GELU and no layer scale; everything else (7x7 depthwise, layer norms of epsilon
1e-6, 4x pointwise layers, the patchify stem, the downsampling layers, the pooled and
normalised head, weight initialisation, drop-path's linear rule) is ConvNeXt's. Depths
and widths are timm's `convnextv2_*` (atto to nano are timm's own; tiny to huge the
release's).

Variables are ConvNeXt's (docs/networks.md), without 'layer_scale' and with
'stage_<i>/block_<j>/global_response_norm/{gamma,beta}'. timm's state_dict names them
(conv weights OIHW, ours HWIO; timm's atto to nano run the pointwise layers as 1x1
convs, [out, in, 1, 1], the others as linear layers, [out, in]; ours are [in, out]):

| ours, under the net's scope | timm |
|---|---|
| stem/conv/{weights,biases}, stem/layer_norm/{gamma,beta} | stem.0.{weight,bias}, stem.1.{weight,bias} |
| stage_<i>/downsample/layer_norm, .../downsample/conv | stages.<i>.downsample.0, stages.<i>.downsample.1 |
| stage_<i>/block_<j>/depthwise_conv/{depthwise_weights,biases} | stages.<i>.blocks.<j>.conv_dw ([c, 1, 7, 7]; ours [7, 7, c, 1]) |
| .../layer_norm | stages.<i>.blocks.<j>.norm |
| .../pointwise_conv_1, .../pointwise_conv_2 | stages.<i>.blocks.<j>.mlp.fc1, .mlp.fc2 |
| .../global_response_norm/{gamma,beta} | stages.<i>.blocks.<j>.mlp.grn.{weight,bias} |
| head/layer_norm, head/logits | head.norm, head.fc |

`TIMM_NAMES` holds that table as (our pattern, timm's pattern) for an importer:
ConvNeXt's (convnext.TIMM_NAMES) without the layer scale, with the response norm.
"""
from nets import convnext
from nets.convnext import ConvNeXt
from nets.registry import register_network

# Variant -> (blocks per stage, channels per stage), as timm's convnextv2_<variant>.
VARIANTS = {
    'atto': ((2, 2, 6, 2), (40, 80, 160, 320)),
    'femto': ((2, 2, 6, 2), (48, 96, 192, 384)),
    'pico': ((2, 2, 6, 2), (64, 128, 256, 512)),
    'nano': ((2, 2, 8, 2), (80, 160, 320, 640)),
    'tiny': ((3, 3, 9, 3), (96, 192, 384, 768)),
    'base': ((3, 3, 27, 3), (128, 256, 512, 1024)),
    'large': ((3, 3, 27, 3), (192, 384, 768, 1536)),
    'huge': ((3, 3, 27, 3), (352, 704, 1408, 2816)),
}
# Our module path (under the net's scope) -> timm's module path; <i>, <j> as above.
# Each module's variables: weights/depthwise_weights/gamma -> weight, biases/beta -> bias.
TIMM_NAMES = tuple(pair for pair in convnext.TIMM_NAMES
                   if not pair[0].endswith('/layer_scale')) + (
    ('stage_<i>/block_<j>/global_response_norm', 'stages.<i>.blocks.<j>.mlp.grn'),)


def _register(name, variant):
    """Registers `name` (also its scope): ConvNeXt V2 of timm's `variant`. Default
    image size 224, as timm's ImageNet-1k fine-tuned weights of every variant."""
    blocks_per_stage, depths = VARIANTS[variant]

    @register_network(name, default_image_size=224, preprocessing_name='convnext_v2',
                      drop_path_option='drop_path_rate')
    def build(num_classes=1000, weight_decay=0.0, is_training=False, **options):
        return ConvNeXt(num_classes, depths=depths, blocks_per_stage=blocks_per_stage,
                        scope=name, weight_decay=weight_decay, is_training=is_training,
                        layer_scale_init=None, global_response_norm=True, **options)

    build.__name__ = build.__qualname__ = name
    return build


convnext_v2_atto = _register('convnext_v2_atto', 'atto')
convnext_v2_femto = _register('convnext_v2_femto', 'femto')
convnext_v2_pico = _register('convnext_v2_pico', 'pico')
convnext_v2_nano = _register('convnext_v2_nano', 'nano')
convnext_v2_tiny = _register('convnext_v2_tiny', 'tiny')
convnext_v2_base = _register('convnext_v2_base', 'base')
convnext_v2_large = _register('convnext_v2_large', 'large')
convnext_v2_huge = _register('convnext_v2_huge', 'huge')
