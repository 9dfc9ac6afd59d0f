"""The one registry of networks: each net module registers its builders with a spec."""
import dataclasses
from typing import Callable, Dict

from core.errors import UsageError


@dataclasses.dataclass(frozen=True)
class NetworkSpec:
    """What the rest of the toolkit needs to know about a network, besides the net itself."""
    name: str
    builder: Callable
    default_image_size: int
    preprocessing_name: str


_NETWORKS: Dict[str, NetworkSpec] = {}


def register_network(name: str, *, default_image_size: int, preprocessing_name: str):
    """Decorator for a builder `(num_classes, weight_decay, is_training, **options) -> Network`."""

    def register(builder):
        if name in _NETWORKS:
            raise ValueError(f'Network {name!r} is registered twice.')
        _NETWORKS[name] = NetworkSpec(name, builder, default_image_size,
                                      preprocessing_name)
        return builder

    return register


def get_spec(name: str) -> NetworkSpec:
    if name not in _NETWORKS:
        raise UsageError(f'Unknown model name {name!r}; choose one of: '
                         f'{", ".join(sorted(_NETWORKS))}.')
    return _NETWORKS[name]


def names():
    return sorted(_NETWORKS)
