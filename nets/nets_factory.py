"""`get_network_fn(name, num_classes, ...)`: a model name to a network object.

Importing this module imports every net module, which registers itself; the list below
is the only place a new net module must be added.
"""
import dataclasses
import numbers
from typing import Optional

from core.errors import UsageError
from nets import cifarnet, lenet  # noqa: F401  (imported to register)
from nets import inception_v3, mobilenet_v1, plain_convnets, resnet  # noqa: F401
from nets import inception_v1, inception_v2  # noqa: F401
from nets.mobilenet import mobilenet_v2, mobilenet_v3  # noqa: F401
from nets.nasnet import nasnet, pnasnet  # noqa: F401
from nets import inception_resnet_v2, inception_v4  # noqa: F401
from nets import video_inception  # noqa: F401
from nets.efficientnet import efficientnet, efficientnet_v2  # noqa: F401
from nets import convnext, convnext_v2  # noqa: F401
from nets.mobilenet_v4 import mobilenet_v4  # noqa: F401
from nets.vit import vit  # noqa: F401
from nets import registry
from nets.layers.fake_quant import QuantizationParams
from nets.network import Network

get_spec = registry.get_spec
network_names = registry.names

# The nets whose spec says `drop_path_option='drop_path_rate'`, as users read them (a
# test keeps the two in step).
DROP_PATH_RATE_FAMILIES = ('resnet_v1_*', 'resnet_v2_*', 'inception_resnet_v2',
                           'mobilenet_v2*', 'mobilenet_v3*', 'mobilenet_edgetpu*',
                           'convnext_*', 'efficientnet_b*', 'efficientnet_v2_*',
                           'vit_*', 'dinov2_*', 'mobilenet_v4_*')


def get_network_fn(name: str, num_classes: int, weight_decay: float = 0.0,
                   is_training: bool = False, *,
                   quantization: Optional[QuantizationParams] = None,
                   batch_norm_decay: Optional[float] = None,
                   batch_norm_epsilon: Optional[float] = None,
                   **options) -> Network:
    """Builds the named network; `net(images)` returns `(logits, end_points)`.

    `quantization` makes it quantization-aware (nets/quantization.py). `options` left as
    None are dropped, so unset command-line values never override a net's own defaults.
    `drop_path_rate` (stochastic depth) is checked here: the residual families take it,
    other nets refuse a rate above 0 (and ignore 0, which asks for nothing).
    `batch_norm_decay` / `batch_norm_epsilon` replace the family's batch-norm moving-average
    decay and epsilon (its registered default when None); a net without batch norm refuses
    them. The network knows its registry spec (`net.spec`, `net.default_image_size`).
    """
    spec = registry.get_spec(name)
    options = {key: value for key, value in options.items() if value is not None}
    if 'drop_path_rate' in options and not _takes_drop_path_rate(spec,
                                                                 options['drop_path_rate']):
        del options['drop_path_rate']
    if batch_norm_decay is not None or batch_norm_epsilon is not None:
        options['batch_norm'] = batch_norm_of(name, batch_norm_decay, batch_norm_epsilon)
    return spec.builder(num_classes=num_classes, weight_decay=weight_decay,
                        is_training=is_training, spec=spec, quantization=quantization,
                        **options)


def _takes_drop_path_rate(spec: registry.NetworkSpec, rate) -> bool:
    """Whether the net's builder gets `rate`: raises UsageError for a rate it cannot
    take, False for a rate of 0 on a net without stochastic depth."""
    if spec.drop_path_option != 'drop_path_rate':
        if rate == 0:
            return False
        families = ', '.join(DROP_PATH_RATE_FAMILIES)
        has = ('has its own drop-path (its drop_path_keep_prob option)'
               if spec.drop_path_option == 'drop_path_keep_prob' else 'has none')
        raise UsageError(f'--drop_path_rate applies to the residual families ({families}); '
                         f'{spec.name} {has}. Drop the flag.')
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0 <= rate < 1:
        raise UsageError(f'--drop_path_rate must be at least 0 and below 1 (the last '
                         f'residual block\'s drop probability, e.g. 0.1); got {rate!r}.')
    return True



def batch_norm_of(name: str, decay: Optional[float] = None,
                  epsilon: Optional[float] = None):
    """The batch norm (layers.BatchNormParams) net `name` is built with given
    --batch_norm_decay / --batch_norm_epsilon (None: the family's); None for a net
    without batch norm, which refuses the flags."""
    spec = registry.get_spec(name)
    given = {key: value for key, value in (('decay', decay), ('epsilon', epsilon))
             if value is not None}
    if spec.batch_norm is None:
        if given:
            flags = ' and '.join(f'--batch_norm_{key}' for key in given)
            raise UsageError(f'{spec.name} has no batch norm, so {flags} does not apply; '
                             f'drop the flag.')
        return None
    if 'decay' in given and not 0 <= given['decay'] < 1:
        raise UsageError(f'--batch_norm_decay must be at least 0 and below 1 (the moving '
                         f'averages\' decay per step, e.g. 0.99); got {decay!r}.')
    if 'epsilon' in given and not given['epsilon'] > 0:
        raise UsageError(f'--batch_norm_epsilon must be above 0 (e.g. 0.001); got {epsilon!r}.')
    return dataclasses.replace(spec.batch_norm, **given)
