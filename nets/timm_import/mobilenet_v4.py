"""timm's MobileNetV4 (`mobilenetv4_conv_small` .. `mobilenetv4_hybrid_large`) into ours
(nets/mobilenet_v4/, whose TIMM_NAMES is the table). Batch norms' running statistics
fill our moving averages; their step counters (`num_batches_tracked`, which evaluation
never reads) are not imported."""
from nets.mobilenet_v4 import mobilenet_v4
from nets.timm_import.mapping import TimmFamily

FAMILY = TimmFamily(
    architectures={f'mobilenet_v4_{variant}': (f'mobilenetv4_{variant}',)
                   for variant in mobilenet_v4.VARIANTS},
    names=mobilenet_v4.TIMM_NAMES,
    classifier='classifier',
    ignored=(r'(.+\.)?num_batches_tracked',),
)
