"""The name-mapping engine: a timm state dict's tensors into our net's variables.

A family's table (nets/timm_import/__init__.py says how a family gives it) pairs our
module paths with timm's, '<i>' and '<j>' standing for numbers:

    ('stage_<i>/block_<j>/depthwise_conv', 'stages.<i>.blocks.<j>.conv_dw')

A timm tensor '<timm module>.<param>' fills our '<our module>/<role>', param 'weight'
becoming weights, depthwise_weights or gamma and 'bias' biases or beta, whichever the
module has; a batch norm's 'running_mean' and 'running_var' its moving_mean and
moving_variance. An entry whose timm side is a whole tensor name pairs two tensors
('position_embedding', 'pos_embed'). Layouts follow from our variable's role: conv
kernels OIHW -> HWIO, depthwise [c, 1, h, w] -> [h, w, c, 1], linear [out, in] (or a
1x1 conv's [out, in, 1, 1]) -> [in, out]; anything else is copied as it is. A fused qkv
stays fused (our attention keeps timm's [q | k | v] order). A position embedding of
another grid is resampled by the net's own `resample_restored`.

Every tensor must fill one variable and every variable be filled once: the first tensor
that does not fit (a file of another model) or variable left empty ends the import in
one line.
"""
import dataclasses
import math
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from core.errors import UsageError
from core.naming import slim_name

# timm's parameter name -> the roles of ours it may be (the first our module has).
PARAM_ROLES = {'weight': ('weights', 'depthwise_weights', 'gamma'),
               'bias': ('biases', 'beta'),
               'running_mean': ('moving_mean',), 'running_var': ('moving_variance',)}
_NUMBER = r'(\d+)'


@dataclasses.dataclass(frozen=True)
class TimmFamily:
    """What a family's mapping module declares as FAMILY (see the package docstring).

    architectures: our model name -> the timm architectures (config.json's
      'architecture', timm's model name without its '.tag') built as it, the first
      being the one our net was checked against.
    names: (our path under the scope, timm's path) pairs, '<i>'/'<j>' for numbers.
    classifier: timm's classifier module ('head', 'head.fc'): its weight's rows are the
      file's class count, none when the file has no head (e.g. DINOv2's encoders).
    our_classifier: ours under the scope; what fine-tuning on other classes leaves out.
    ignored: timm tensor names (regular expressions) with no counterpart that do not
      change the logits, e.g. a training-only mask token.
    """
    architectures: Mapping[str, Tuple[str, ...]]
    names: Tuple[Tuple[str, str], ...]
    classifier: str
    our_classifier: str = 'head/logits'
    ignored: Tuple[str, ...] = ()


def _pattern(path: str) -> str:
    """'stages.<i>.blocks.<j>.conv_dw' as a regular expression, its numbers as groups."""
    parts = re.split(r'(<[a-z]>)', path)
    return ''.join(_NUMBER if re.fullmatch(r'<[a-z]>', p) else re.escape(p) for p in parts)


def _fill(template: str, numbers: Sequence[str]) -> str:
    numbers = iter(numbers)
    return re.sub(r'<[a-z]>', lambda _: next(numbers), template)


@dataclasses.dataclass(frozen=True)
class Assignment:
    timm_name: str
    timm_shape: Tuple[int, ...]
    variable: tf.Variable
    value: np.ndarray
    transformed: bool  # another layout than timm's
    resampled: Optional[str] = None  # what resampling did, for the report


def to_our_layout(value: np.ndarray, role: str, our_rank: int) -> np.ndarray:
    """timm's (PyTorch's) layout of a tensor in our variable's, from our role."""
    if role == 'depthwise_weights' and value.ndim == 4:  # [c, 1, h, w] -> [h, w, c, 1]
        return value.transpose(2, 3, 0, 1)
    if role == 'weights' and value.ndim == 4:
        if our_rank == 2:  # a 1x1 conv as our dense layer
            return value.reshape(value.shape[:2]).T
        return value.transpose(2, 3, 1, 0)  # OIHW -> HWIO
    if role == 'weights' and value.ndim == 2:  # linear [out, in] -> [in, out]
        return value.T if our_rank == 2 else value.T.reshape((1, 1) + value.T.shape)
    return value


class Mapper:
    """A family's table against one built net: which variable a timm tensor fills."""

    def __init__(self, family: TimmFamily, network, model_name: str):
        self.family, self.network, self.model_name = family, network, model_name
        prefix = network.relative_name + '/' if network.relative_name else ''
        self.variables = {slim_name(v)[len(prefix):]: v for v in network.variables}
        self.scope_prefix = prefix
        self.rules = [(re.compile(_pattern(timm)), ours)
                      for ours, timm in family.names]
        self.ignored = [re.compile(p) for p in family.ignored]

    def our_path(self, timm_name: str) -> Optional[Tuple[str, str]]:
        """(our variable path, its role) for a timm tensor, or None when no entry names
        it or our net has no such variable."""
        module, _, param = timm_name.rpartition('.')
        for pattern, ours in self.rules:
            whole = pattern.fullmatch(timm_name)
            if whole:
                path = _fill(ours, whole.groups())
                return (path, path.rsplit('/', 1)[-1]) if path in self.variables else None
            part = pattern.fullmatch(module)
            if part:
                base = _fill(ours, part.groups())
                for role in PARAM_ROLES.get(param, (param,)):
                    if f'{base}/{role}' in self.variables:
                        return f'{base}/{role}', role
        return None

    def is_ignored(self, timm_name: str) -> bool:
        return any(p.fullmatch(timm_name) for p in self.ignored)

    def misfit(self, name, value, why) -> UsageError:
        expected = ', '.join(self.family.architectures[self.model_name])
        return UsageError(f'The file is no {self.model_name} ({expected}): its tensor '
                          f'{name!r} {list(value.shape)} {why}; pass weights of that '
                          f'architecture, or the --model_name they are of.')

    def _describe_resampling(self, path, stored_shape, our_shape) -> str:
        """'<path>: the 37x37 grid resampled to 16x16 (bicubic)', from the net's grid."""
        grid = getattr(self.network, 'grid', None)
        what = f'{list(stored_shape)} resampled to {our_shape.as_list()}'
        if grid and len(stored_shape) == 3:
            prefix = our_shape[1] - grid[0] * grid[1]
            side = math.isqrt(stored_shape[1] - prefix)
            what = f'the {side}x{side} grid resampled to {grid[0]}x{grid[1]}'
        return f'{self.scope_prefix}{path}: {what} (bicubic, as timm\'s resample_abs_pos_embed)'

    def assign_one(self, name: str, value: np.ndarray) -> Assignment:
        found = self.our_path(name)
        if found is None:
            raise self.misfit(name, value, f'fits no variable of {self.model_name}')
        path, role = found
        variable = self.variables[path]
        ours = to_our_layout(value, role, variable.shape.rank)
        resampled = None
        if tuple(ours.shape) != tuple(variable.shape):
            refit = getattr(self.network, 'resample_restored', lambda *_: None)(
                variable, ours)
            if refit is None or tuple(refit.shape) != tuple(variable.shape):
                raise self.misfit(name, value, f'does not fit {self.scope_prefix}{path} '
                                   f'{variable.shape.as_list()}')
            resampled = self._describe_resampling(path, ours.shape, variable.shape)
            ours = refit
        return Assignment(name, tuple(value.shape), variable, ours,
                          ours is not value, resampled)


@dataclasses.dataclass
class Transfer:
    assignments: List[Assignment]
    ignored: List[str]
    num_tensors: int

    def copy(self):
        for assignment in self.assignments:
            assignment.variable.assign(assignment.value.astype(np.float32))

    @property
    def resampled(self) -> List[str]:
        return [a.resampled for a in self.assignments if a.resampled]

    def report(self) -> str:
        """The restore report, worded as the Keras import's."""
        transformed = sum(a.transformed for a in self.assignments)
        lines = [f'Restore report: {len(self.assignments)} of {self.num_tensors} timm '
                 f'tensors copied, each exactly once ({transformed} transformed to our '
                 f'layout), none left over'
                 + (f'; {len(self.ignored)} tensors with no part in the logits not '
                    f'imported: {", ".join(self.ignored)}' if self.ignored else '')
                 + '. 0 of our variables not filled.']
        lines += [f'  {note}' for note in self.resampled]
        return '\n'.join(lines)


def pair(family: TimmFamily, network, model_name: str,
         tensors: Dict[str, np.ndarray]) -> Transfer:
    """Every tensor of the file paired with one variable of the built net (UsageError at
    the first that does not fit, or at a variable no tensor fills)."""
    mapper = Mapper(family, network, model_name)
    assignments, ignored, filled = [], [], {}
    for name, value in tensors.items():
        if mapper.is_ignored(name):
            ignored.append(name)
            continue
        assignment = mapper.assign_one(name, value)
        key = id(assignment.variable)
        if key in filled:
            raise mapper.misfit(name, value, f'fills {slim_name(assignment.variable)}, '
                                 f'which {filled[key]!r} filled already')
        filled[key] = name
        assignments.append(assignment)
    empty = [slim_name(v) for v in network.variables if id(v) not in filled]
    if empty:
        expected = ', '.join(family.architectures[model_name])
        raise UsageError(f'The file is no {model_name} ({expected}): it holds no tensor '
                         f'for {empty[0]}{f" and {len(empty) - 1} more" if len(empty) > 1 else ""}'
                         f'; pass weights of that architecture, or the --model_name they '
                         f'are of.')
    return Transfer(assignments, ignored, len(tensors))


def file_classes(family: TimmFamily, tensors: Dict[str, np.ndarray]) -> int:
    """The file's class count: the rows of its classifier's weight, 0 without one."""
    weight = tensors.get(f'{family.classifier}.weight')
    return int(weight.shape[0]) if weight is not None else 0
