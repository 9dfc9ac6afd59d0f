"""Which variables the decoupled optimizers decay: --weight_decay_exclude's categories.

The references (timm, BEiT, DeiT, ConvNeXt, DINOv2) leave norm scales and offsets,
biases, position embeddings and class/register tokens undecayed, and layer scales (they
skip every 1-D parameter); so does the default here. A category is matched on the
variable's TF-Slim name:

    norms:         a scope whose name holds 'norm' ('BatchNorm/gamma', 'layer_norm/beta')
    biases:        the leaf 'biases' or 'bias'
    embeddings:    the leaf 'position_embedding' or a token ('class_token',
                   'register_tokens')
    layer_scales:  the leaf 'layer_scale' (ConvNeXt's) or 'layer_scale_<n>' (DINOv2's)

(a patch embedding's conv kernel is a weight: decayed, as in timm.)
"""
import dataclasses
import re
from typing import Optional, Sequence

from core.errors import UsageError
from core.naming import slim_name

CATEGORIES = ('norms', 'biases', 'embeddings', 'layer_scales')
DEFAULT_EXCLUDE = CATEGORIES

_NORM_SCOPE = re.compile(r'norm', re.IGNORECASE)
_EMBEDDING_LEAF = re.compile(r'(position_embedding|pos_embed|_tokens?|^tokens?)$')


def _parts(name: str):
    parts = name.split('/')
    if re.fullmatch(r'part_\d+', parts[-1]):  # a partitioned variable's piece
        parts = parts[:-1]
    return parts


def category_of(name: str) -> Optional[str]:
    """The exclusion category of a variable named `name`, or None (a weight)."""
    parts = _parts(name)
    if parts[-1] in ('biases', 'bias'):
        return 'biases'
    if any(_NORM_SCOPE.search(scope) for scope in parts[:-1]):
        return 'norms'
    if _EMBEDDING_LEAF.search(parts[-1]):
        return 'embeddings'
    if re.fullmatch(r'layer_scale(_\d+)?', parts[-1]):
        return 'layer_scales'
    return None


def parse_exclude(text: Optional[str]) -> tuple:
    """--weight_decay_exclude as categories; None (unset) is the references' default and
    'none' (or '') excludes nothing."""
    if text is None:
        return DEFAULT_EXCLUDE
    names = tuple(name.strip() for name in text.split(',') if name.strip())
    if names in ((), ('none',)):
        return ()
    unknown = [name for name in names if name not in CATEGORIES]
    if unknown:
        raise UsageError(f'--weight_decay_exclude={text} names {", ".join(unknown)}; use '
                         f'a comma-separated list of {", ".join(CATEGORIES)}, or none.')
    return names


@dataclasses.dataclass(frozen=True)
class DecayMask:
    """The categories not decayed; explicit: the user named them, so each must match."""
    exclude: tuple = DEFAULT_EXCLUDE
    explicit: bool = False

    @classmethod
    def from_flag(cls, text: Optional[str]) -> 'DecayMask':
        return cls(exclude=parse_exclude(text), explicit=text is not None)

    def decays(self, variable) -> bool:
        return category_of(slim_name(variable)) not in self.exclude

    def check_matches(self, variables: Sequence) -> None:
        """A category the user named that matches none of `variables` is a mistake."""
        if not self.explicit:
            return
        found = {category_of(slim_name(v)) for v in variables}
        unmatched = [name for name in self.exclude if name not in found]
        if unmatched:
            raise UsageError(
                f'--weight_decay_exclude names {", ".join(unmatched)}, which match no '
                'trained variable of this network; drop '
                f'{"it" if len(unmatched) == 1 else "them"} from the list.')
