"""Where a timm model's files are: --timm_weights as a model.safetensors file, a
Hugging Face snapshot folder holding model.safetensors and config.json, or
hf_hub:<repository id> (downloaded through huggingface_hub when it is installed and the
hub is reachable; otherwise one line naming the files and where to put them)."""
import dataclasses
import json
import os
from typing import Optional

from core.errors import UsageError

HF_HUB = 'hf_hub:'
WEIGHTS_FILE = 'model.safetensors'
CONFIG_FILE = 'config.json'


@dataclasses.dataclass(frozen=True)
class TimmFiles:
    weights: str
    config: Optional[dict]  # config.json's contents; None beside a bare file without one
    source: str  # what --timm_weights said


def _read_config(path: str) -> dict:
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f'{path} is no readable JSON ({error}); pass the config.json '
                         f'timm wrote beside the weights.') from None
    if not isinstance(config, dict):
        raise UsageError(f'{path} is no JSON object; pass timm\'s config.json.')
    return config


def _from_folder(folder: str, source: str) -> TimmFiles:
    weights = os.path.join(folder, WEIGHTS_FILE)
    if not os.path.isfile(weights):
        raise UsageError(f'{folder} holds no {WEIGHTS_FILE}; pass a Hugging Face '
                         f'snapshot folder of a timm model (model.safetensors and '
                         f'config.json), or the .safetensors file itself.')
    config = os.path.join(folder, CONFIG_FILE)
    return TimmFiles(weights, _read_config(config) if os.path.isfile(config) else None,
                     source)


def _download(repository: str) -> str:
    """The snapshot folder of hf_hub:<repository>, from huggingface_hub's cache or the
    hub; one line when neither can give it."""
    where = f'a folder holding its {WEIGHTS_FILE} and {CONFIG_FILE} (from ' \
            f'https://huggingface.co/{repository}/tree/main), passed as --timm_weights'
    try:
        import huggingface_hub  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise UsageError(f'hf_hub:{repository} needs the huggingface_hub package, which '
                         f'is not installed; without it, download {where}.') from None
    try:
        return huggingface_hub.snapshot_download(
            repository, allow_patterns=[WEIGHTS_FILE, CONFIG_FILE])
    except Exception as error:  # pylint: disable=broad-except  (offline, unknown id)
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UsageError(f'Could not download hf_hub:{repository} ({reason}); offline, '
                         f'put {where}.') from None


def locate(timm_weights: str) -> TimmFiles:
    """The weights file and config of --timm_weights."""
    if timm_weights.startswith(HF_HUB):
        repository = timm_weights[len(HF_HUB):].strip('/')
        if repository.count('/') != 1:
            raise UsageError(f'--timm_weights={timm_weights}: pass hf_hub:<owner>/<name>, '
                             f'e.g. hf_hub:timm/vit_base_patch16_224.augreg2_in21k_ft_in1k.')
        return _from_folder(_download(repository), timm_weights)
    if os.path.isdir(timm_weights):
        return _from_folder(timm_weights, timm_weights)
    if not os.path.isfile(timm_weights):
        raise UsageError(f'--timm_weights={timm_weights} does not exist; pass a timm '
                         f'{WEIGHTS_FILE}, its Hugging Face snapshot folder, or '
                         f'hf_hub:<id>.')
    config = os.path.join(os.path.dirname(os.path.abspath(timm_weights)), CONFIG_FILE)
    return TimmFiles(timm_weights, _read_config(config) if os.path.isfile(config) else None,
                     timm_weights)
