"""The engine's steps, for the import job (cli/timm_import_job.py):

    family = catalog.get(model_name)
    files = files.locate(timm_weights)
    imported = import_into_ours(model_name, family, files, image_size)

config.json (timm's, beside the weights) names the architecture, which must be one our
net is built as, the class count and names, and pretrained_cfg, the preprocessing the
weights were evaluated with (what `preprocessing_of` keeps).
"""
import dataclasses
from typing import Optional

import tensorflow as tf

from core.errors import UsageError
from nets import nets_factory
from nets.timm_import import mapping, safetensors
from nets.timm_import.files import TimmFiles
from nets.timm_import.mapping import TimmFamily

# pretrained_cfg's keys the preprocessing needs, as timm's data config names them.
PREPROCESSING_KEYS = ('mean', 'std', 'crop_pct', 'interpolation', 'input_size',
                      'crop_mode')


def architecture_of(config: Optional[dict]) -> Optional[str]:
    """config.json's timm model name without its '.tag'."""
    if not config:
        return None
    name = config.get('architecture') or config.get('pretrained_cfg', {}).get(
        'architecture')
    return name.split('.', 1)[0] if isinstance(name, str) else None


def check_architecture(family: TimmFamily, model_name: str, files: TimmFiles):
    architecture = architecture_of(files.config)
    accepted = family.architectures[model_name]
    if architecture is not None and architecture not in accepted:
        raise UsageError(f'{files.source} holds timm\'s {architecture}, not '
                         f'--model_name={model_name} (timm\'s {", ".join(accepted)}); pass '
                         f'the --model_name of its architecture, or weights of '
                         f'{accepted[0]}.')


def preprocessing_of(config: Optional[dict]) -> dict:
    """pretrained_cfg's preprocessing (mean, std, crop_pct, interpolation, input_size,
    crop_mode), those it gives."""
    cfg = (config or {}).get('pretrained_cfg') or {}
    return {key: cfg[key] for key in PREPROCESSING_KEYS if key in cfg}


def label_names(config: Optional[dict]) -> Optional[list]:
    names = (config or {}).get('label_names')
    return list(names) if isinstance(names, (list, tuple)) else None


def num_classes_of(family: TimmFamily, files: TimmFiles, tensors) -> int:
    """The file's classifier rows (0 without a classifier); config.json must agree."""
    in_file = mapping.file_classes(family, tensors)
    said = (files.config or {}).get('num_classes')
    if said is not None and int(said) != in_file:
        raise UsageError(f'{files.source}: config.json says {said} classes, its '
                         f'{family.classifier}.weight has {in_file} rows; pass the '
                         f'config.json of those weights.')
    return in_file


@dataclasses.dataclass(frozen=True)
class Imported:
    network: object
    transfer: mapping.Transfer
    num_classes: int
    image_size: int


def build_ours(model_name: str, num_classes: int, image_size: int):
    """Our net with the file's classes, called once so its variables exist."""
    network = nets_factory.get_network_fn(model_name, num_classes)
    network(tf.zeros([1, image_size, image_size, 3]), training=False)
    return network


def import_into_ours(model_name: str, family: TimmFamily, files: TimmFiles,
                     image_size: Optional[int] = None) -> Imported:
    """Reads the weights, builds our net at image_size (default: its registry size),
    pairs and copies every tensor."""
    check_architecture(family, model_name, files)
    tensors = safetensors.read(files.weights)
    num_classes = num_classes_of(family, files, tensors)
    size = image_size or nets_factory.get_spec(model_name).default_image_size
    network = build_ours(model_name, num_classes, size)
    moved = mapping.pair(family, network, model_name, tensors)
    moved.copy()
    return Imported(network, moved, num_classes, size)
