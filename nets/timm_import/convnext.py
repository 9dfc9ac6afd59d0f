"""timm's ConvNeXt (`convnext_tiny` .. `convnext_xlarge`, layer scale as each block's
'gamma') into ours (nets/convnext.py, Keras's architecture, which is timm's)."""
from nets import convnext
from nets.timm_import.mapping import TimmFamily

FAMILY = TimmFamily(
    architectures={name: (name,) for name in (
        'convnext_tiny', 'convnext_small', 'convnext_base', 'convnext_large',
        'convnext_xlarge')},
    names=convnext.TIMM_NAMES,
    classifier='head.fc',
)
