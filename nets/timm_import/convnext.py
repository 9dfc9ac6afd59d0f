"""timm's ConvNeXt (`convnext_tiny` .. `convnext_xlarge`, layer scale as each block's
'gamma') into ours (nets/convnext.py, Keras's architecture, which is timm's)."""
from nets.timm_import.mapping import TimmFamily

FAMILY = TimmFamily(
    architectures={name: (name,) for name in (
        'convnext_tiny', 'convnext_small', 'convnext_base', 'convnext_large',
        'convnext_xlarge')},
    names=(
        ('stem/conv', 'stem.0'),
        ('stem/layer_norm', 'stem.1'),
        ('stage_<i>/downsample/layer_norm', 'stages.<i>.downsample.0'),
        ('stage_<i>/downsample/conv', 'stages.<i>.downsample.1'),
        ('stage_<i>/block_<j>/depthwise_conv', 'stages.<i>.blocks.<j>.conv_dw'),
        ('stage_<i>/block_<j>/layer_norm', 'stages.<i>.blocks.<j>.norm'),
        ('stage_<i>/block_<j>/pointwise_conv_1', 'stages.<i>.blocks.<j>.mlp.fc1'),
        ('stage_<i>/block_<j>/pointwise_conv_2', 'stages.<i>.blocks.<j>.mlp.fc2'),
        ('stage_<i>/block_<j>/layer_scale', 'stages.<i>.blocks.<j>.gamma'),
        ('head/layer_norm', 'head.norm'),
        ('head/logits', 'head.fc'),
    ),
    classifier='head.fc',
)
