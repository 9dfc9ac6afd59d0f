"""Each variable's depth, for layer-wise learning-rate decay (BEiT, Bao et al. 2021; timm's
--layer-decay): the one place where the families that can say it do.

A net of depth D (its blocks) has D + 2 layers: 0 is the stem (ViT: patch embedding,
class and register tokens, position embedding), 1..D its blocks in order, D + 1 the
rest (final norm, head). With --layer_decay=d a variable at depth k trains at
d ** (D + 1 - k) times the learning rate: the head at the full rate, the stem at the
smallest. The blocks are timm's `group_matcher` groups:

    ViT, DINOv2          block_<i>                      -> i + 1
    ConvNeXt (V1, V2)    stage_<s>/block_<b>            -> 1 + its index over all stages;
                         stage_<s>/downsample           -> its stage's first block's
"""
import dataclasses
import re
from typing import Callable, Dict, Optional

from core.naming import slim_name
from nets.convnext import ConvNeXt
from nets.vit.model import VisionTransformer

_VIT_STEM = ('patch_embedding', 'class_token', 'register_tokens', 'position_embedding')
_VIT_BLOCK = re.compile(r'block_(\d+)$')
_CONVNEXT_BLOCK = re.compile(r'stage_(\d+)/(?:block_(\d+)|downsample)$')


@dataclasses.dataclass(frozen=True)
class LayerDepths:
    """depth_of: variable name -> depth, 0 .. num_layers - 1."""
    num_layers: int
    depth_of: Dict[str, int]

    def scales(self, layer_decay: float) -> Dict[str, float]:
        """Variable name -> its learning-rate scale, layer_decay ** (last - depth)."""
        last = self.num_layers - 1
        return {name: layer_decay ** (last - depth) for name, depth in self.depth_of.items()}


def _relative(variable) -> list:
    """A variable's scopes below the net's own ('vit_tiny_16/block_0/mlp/...')."""
    return slim_name(variable).split('/')[1:]


def _vit_depths(network) -> LayerDepths:
    blocks = {}
    for variable in network.trainable_variables:
        match = _VIT_BLOCK.match(_relative(variable)[0])
        if match:
            blocks[slim_name(variable)] = int(match.group(1)) + 1
    last = max(blocks.values(), default=0) + 1
    return LayerDepths(last + 1, {
        slim_name(v): (0 if _relative(v)[0] in _VIT_STEM
                       else blocks.get(slim_name(v), last))
        for v in network.trainable_variables})


def _convnext_depths(network) -> LayerDepths:
    positions = {}  # variable name -> (stage, block); a downsample is its stage's block 0
    for variable in network.trainable_variables:
        match = _CONVNEXT_BLOCK.match('/'.join(_relative(variable)[:2]))
        if match:
            positions[slim_name(variable)] = (int(match.group(1)), int(match.group(2) or 0))
    order = {position: index + 1 for index, position in
             enumerate(sorted(set(positions.values())))}
    last = len(order) + 1
    return LayerDepths(last + 1, {
        slim_name(v): (0 if _relative(v)[0] == 'stem'
                       else order[positions[slim_name(v)]] if slim_name(v) in positions
                       else last)
        for v in network.trainable_variables})


_FAMILIES: Dict[type, Callable] = {VisionTransformer: _vit_depths, ConvNeXt: _convnext_depths}
FAMILY_NAMES = ('ViT', 'DINOv2', 'ConvNeXt', 'ConvNeXt V2')


def layer_depths(network) -> Optional[LayerDepths]:
    """The depths of a built network's trainable variables; None for a family that does
    not say them."""
    for family, depths in _FAMILIES.items():
        if isinstance(network, family):
            return depths(network)
    return None
