"""Which of our nets take timm's weights: every module of this package that declares a
FAMILY (a mapping.TimmFamily) contributes its nets; nothing else lists them."""
import functools
import importlib
import pkgutil
from typing import Dict

from core.errors import UsageError
from nets.timm_import.mapping import TimmFamily

ENGINE_MODULES = ('catalog', 'mapping', 'safetensors', 'files', 'transfer')


@functools.lru_cache(maxsize=None)
def families() -> Dict[str, TimmFamily]:
    """Our model name -> its family's mapping, from every family module here."""
    package = importlib.import_module('nets.timm_import')
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name in ENGINE_MODULES:
            continue
        family = getattr(importlib.import_module(f'nets.timm_import.{info.name}'),
                         'FAMILY', None)
        if not isinstance(family, TimmFamily):
            continue
        for model_name in family.architectures:
            if model_name in found:
                raise ValueError(f'{model_name!r} has two timm mappings.')
            found[model_name] = family
    return found


def names() -> list:
    return sorted(families())


def get(model_name: str) -> TimmFamily:
    """The mapping of our net `model_name`; one line listing the supported ones else."""
    if model_name not in families():
        raise UsageError(f'--model_name={model_name} has no timm model of its '
                         f'architecture here; timm weights import into: '
                         f'{", ".join(names())}.')
    return families()[model_name]
