"""The records of layer tables (slim's `conv_defs`): one record type per kind of layer,
shared by the families described by tables (MobileNet v1 in nets/mobilenet_v1.py, v2 and
v3 in nets/mobilenet/). A table is a sequence of records; its builder names and strides
the layers."""
import dataclasses
from typing import Callable, Optional


@dataclasses.dataclass(frozen=True)
class Conv:
    """A slim.conv2d layer: convolution, batch norm (or biases), activation."""
    num_outputs: int
    kernel_size: int = 3
    stride: int = 1
    activation: Optional[Callable] = None  # None: the table's default
    batch_norm: bool = True


@dataclasses.dataclass(frozen=True)
class DepthSepConv:
    """MobileNet v1's depthwise-separable conv: a kxk depthwise conv, then a 1x1
    pointwise conv to `num_outputs`, each batch-normalised with the table's activation."""
    num_outputs: int
    kernel_size: int = 3
    stride: int = 1


@dataclasses.dataclass(frozen=True)
class ExpandedConv:
    """An inverted-residual block (MobileNet v2/v3); its expansion depth is the input
    depth times `expansion`, rounded to a multiple of `expansion_divisible_by`. `fused`
    replaces the 1x1 expansion and the depthwise convolution by one k x k convolution
    (EdgeTPU)."""
    num_outputs: int
    expansion: float = 6.0
    expansion_divisible_by: int = 8
    kernel_size: int = 3
    stride: int = 1
    activation: Optional[Callable] = None  # None: the table's default
    squeeze_excite: bool = False
    residual: bool = True
    fused: bool = False


@dataclasses.dataclass(frozen=True)
class AvgPoolTo1x1:
    """slim's V3 `reduce_to_1x1`: a VALID average pool over the whole (square) map, of
    `default_size` when the map's size is unknown or not square."""
    default_size: int = 7
