"""The one registry of networks: each net module registers its builders with a spec."""
import dataclasses
from typing import Any, Callable, Dict, Optional

from core.errors import UsageError


@dataclasses.dataclass(frozen=True)
class NetworkSpec:
    """What the rest of the toolkit needs to know about a network, besides the net itself."""
    name: str
    builder: Callable
    default_image_size: int
    preprocessing_name: str
    # Classes of TF-Slim's published ImageNet checkpoint: 1001 (0 = background, as the
    # converted ImageNet; --labels_offset=0) or 1000 (VGG, ResNet v1: --labels_offset=1).
    # None: no published ImageNet checkpoint.
    checkpoint_num_classes: Optional[int] = None
    checkpoint_file: Optional[str] = None  # the archive of TF-Slim's model zoo
    # Video nets take [batch, frames, height, width, channels] clips of this many frames.
    num_frames: Optional[int] = None
    # The builder option that sets the net's drop-path: 'drop_path_rate' (stochastic
    # depth over residual blocks), 'drop_path_keep_prob' (NASNet's cells) or None.
    drop_path_option: Optional[str] = None
    # The family's batch norm (a layers.BatchNormParams, TF-Slim's or the official
    # release's values), or None for a net without one. A net that has one takes a
    # `batch_norm` builder option (--batch_norm_decay / --batch_norm_epsilon replace
    # fields of this default).
    batch_norm: Optional[Any] = None

    def input_shape(self, image_size: Optional[int] = None, channels: int = 3) -> tuple:
        """One example's shape: (height, width, channels), with frames first for video."""
        size = image_size or self.default_image_size
        return (*((self.num_frames,) if self.num_frames else ()), size, size, channels)

    @property
    def imagenet_labels_offset(self) -> Optional[int]:
        """The --labels_offset a TF-Slim ImageNet checkpoint of this net needs."""
        return None if self.checkpoint_num_classes is None else 1001 - self.checkpoint_num_classes


_NETWORKS: Dict[str, NetworkSpec] = {}


def register_network(name: str, *, default_image_size: int, preprocessing_name: str,
                     checkpoint_num_classes: Optional[int] = None,
                     checkpoint_file: Optional[str] = None,
                     num_frames: Optional[int] = None,
                     drop_path_option: Optional[str] = None,
                     batch_norm: Optional[Any] = None):
    """Decorator for a builder `(num_classes, weight_decay, is_training, *, spec,
    quantization, **options) -> Network`, registered under the literal `name` (so a grep
    for the name finds it). The builder hands `spec` and `quantization` to the
    Network's constructor."""

    def register(builder):
        if name in _NETWORKS:
            raise ValueError(f'Network {name!r} is registered twice.')
        _NETWORKS[name] = NetworkSpec(name, builder, default_image_size,
                                      preprocessing_name, checkpoint_num_classes,
                                      checkpoint_file, num_frames, drop_path_option,
                                      batch_norm)
        return builder

    return register


def get_spec(name: str) -> NetworkSpec:
    if name not in _NETWORKS:
        raise UsageError(f'Unknown model name {name!r}; choose one of: '
                         f'{", ".join(sorted(_NETWORKS))}.')
    return _NETWORKS[name]


def names():
    return sorted(_NETWORKS)
