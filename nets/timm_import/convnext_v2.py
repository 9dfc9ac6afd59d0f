"""timm's ConvNeXt V2 (`convnextv2_atto` .. `convnextv2_huge`) into ours
(nets/convnext_v2.py, whose TIMM_NAMES is the table). timm runs atto to nano's pointwise
layers as 1x1 convs and the others' as linear layers; both become our dense layers."""
from nets import convnext_v2
from nets.timm_import.mapping import TimmFamily

FAMILY = TimmFamily(
    architectures={f'convnext_v2_{variant}': (f'convnextv2_{variant}',)
                   for variant in convnext_v2.VARIANTS},
    names=convnext_v2.TIMM_NAMES,
    classifier='head.fc',
)
