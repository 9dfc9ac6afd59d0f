"""Each variable's depth, for layer-wise learning-rate decay (BEiT, Bao et al. 2021; timm's
--layer-decay): the one place where the families that can say it do.

The depths are timm's `group_matcher` layers (timm/models/_manipulate.py): the stem is
0, each block one layer in order, a final norm or head conv joins the last block (timm's
(99999,) group), and what is left (the classifier) is the last layer. With
--layer_decay=d a variable at depth k of a net whose last layer is L trains at
d ** (L - k) times the learning rate. Per family, by the variables' scopes below the
net's own:

    ViT, DINOv2       stem: patch_embedding, class_token, register_tokens,
                      position_embedding; blocks: block_<i>; with the last: final_norm
    ConvNeXt (V1, V2) stem: stem; blocks: stage_<s>/block_<b> in order, a stage's
                      downsample with its first block
    ResNet v1, v2     stem: conv1; blocks: block<b>/unit_<u> in order; with the last:
                      postnorm (v2)
    EfficientNet(V2)  stem: stem; blocks: blocks_<i>; with the last: head's conv and norm
    MobileNet V2      stem: Conv; blocks: expanded_conv[_<k>]; with the last: Conv_1
                      (timm builds it as an EfficientNet: Conv_1 is its conv_head)
    MobileNet V3      stem: Conv; blocks: expanded_conv[_<k>], then Conv_1 (the last
                      stage's 1x1 conv, timm's); Conv_2 (timm's conv_head) with the logits

(timm's ViT leaves its register tokens to the head's layer; here they are the stem's,
beside the class token.)
"""
import dataclasses
import re
from typing import Dict, Optional

from core.naming import slim_name
from nets.convnext import ConvNeXt
from nets.efficientnet.model import EfficientNet
from nets.mobilenet.mobilenet import MobileNet
from nets.resnet import ResNet
from nets.vit.model import VisionTransformer


@dataclasses.dataclass(frozen=True)
class LayerDepths:
    """depth_of: variable name -> depth, 0 .. num_layers - 1."""
    num_layers: int
    depth_of: Dict[str, int]

    def scales(self, layer_decay: float) -> Dict[str, float]:
        """Variable name -> its learning-rate scale, layer_decay ** (last - depth)."""
        last = self.num_layers - 1
        return {name: layer_decay ** (last - depth) for name, depth in self.depth_of.items()}


_AFTER = 10**9  # sorts after every numbered block


@dataclasses.dataclass(frozen=True)
class _Family:
    """Regular expressions on a variable's scopes below the net's ('block_3/mlp/...')."""
    stem: str
    block: str  # its groups, as numbers, order the blocks; a missing group counts 0
    with_last_block: str = r'$^'  # matches nothing
    block_after: str = r'$^'  # one more block, after the numbered ones

    def depths(self, network) -> Optional[LayerDepths]:
        """None when no variable is in a block: the net is not of this layout."""

        names = [slim_name(v) for v in network.trainable_variables]
        relative = {name: name.split('/', 1)[1] for name in names}
        keys = {}
        for name, path in relative.items():
            match = re.match(self.block, path)
            if match:
                keys[name] = tuple(int(group or 0) for group in match.groups())
            elif re.match(self.block_after, path):
                keys[name] = (_AFTER,)
        if not keys:
            return None
        order = {key: index + 1 for index, key in enumerate(sorted(set(keys.values())))}
        last_block, head = len(order), len(order) + 1
        depth_of = {}
        for name, path in relative.items():
            if re.match(self.stem, path):
                depth_of[name] = 0
            elif name in keys:
                depth_of[name] = order[keys[name]]
            elif re.match(self.with_last_block, path):
                depth_of[name] = last_block
            else:
                depth_of[name] = head
        return LayerDepths(head + 1, depth_of)


_FAMILIES = {
    VisionTransformer: _Family(
        stem=r'(patch_embedding|class_token|register_tokens|position_embedding)(/|$)',
        block=r'block_(\d+)/', with_last_block=r'final_norm/'),
    ConvNeXt: _Family(stem=r'stem/', block=r'stage_(\d+)/(?:block_(\d+)|downsample)/'),
    ResNet: _Family(stem=r'conv1/', block=r'block(\d+)/unit_(\d+)/',
                    with_last_block=r'postnorm/'),
    EfficientNet: _Family(stem=r'stem/', block=r'blocks_(\d+)/',
                          with_last_block=r'head/(conv2d|tpu_batch_normalization)/'),
}
# By the net's scope: V2 and V3 share a class.
_MOBILENETS = {
    'MobilenetV2': _Family(stem=r'Conv/', block=r'expanded_conv(?:_(\d+))?/',
                           with_last_block=r'Conv_1/'),
    'MobilenetV3': _Family(stem=r'Conv/', block=r'expanded_conv(?:_(\d+))?/',
                           block_after=r'Conv_1/'),
}
FAMILY_NAMES = ('ViT', 'DINOv2', 'ConvNeXt', 'ConvNeXt V2', 'ResNet', 'EfficientNet',
                'EfficientNetV2', 'MobileNet V2', 'MobileNet V3')


def layer_depths(network) -> Optional[LayerDepths]:
    """The depths of a built network's trainable variables; None for a family that does
    not say them."""
    if isinstance(network, MobileNet):
        rules = _MOBILENETS.get(network.name)
        return rules.depths(network) if rules else None
    for family, rules in _FAMILIES.items():
        if isinstance(network, family):
            return rules.depths(network)
    return None
