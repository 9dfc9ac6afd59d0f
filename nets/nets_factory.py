"""`get_network_fn(name, num_classes, ...)`: a model name to a network object.

Importing this module imports every net module, which registers itself; the list below
is the only place a new net module must be added.
"""
from typing import Optional

from nets import cifarnet, lenet  # noqa: F401  (imported to register)
from nets import inception_v3, mobilenet_v1, plain_convnets, resnet  # noqa: F401
from nets import inception_v1, inception_v2  # noqa: F401
from nets.mobilenet import mobilenet_v2, mobilenet_v3  # noqa: F401
from nets.nasnet import nasnet, pnasnet  # noqa: F401
from nets import inception_resnet_v2, inception_v4  # noqa: F401
from nets import video_inception  # noqa: F401
from nets import registry
from nets.layers.fake_quant import QuantizationParams
from nets.network import Network

get_spec = registry.get_spec
network_names = registry.names


def get_network_fn(name: str, num_classes: int, weight_decay: float = 0.0,
                   is_training: bool = False, *,
                   quantization: Optional[QuantizationParams] = None,
                   **options) -> Network:
    """Builds the named network; `net(images)` returns `(logits, end_points)`.

    `quantization` makes it quantization-aware (nets/quantization.py). `options` left as
    None are dropped, so unset command-line values never override a net's own defaults.
    The network knows its registry spec (`net.spec`, `net.default_image_size`).
    """
    spec = registry.get_spec(name)
    options = {key: value for key, value in options.items() if value is not None}
    return spec.builder(num_classes=num_classes, weight_decay=weight_decay,
                        is_training=is_training, spec=spec, quantization=quantization,
                        **options)
