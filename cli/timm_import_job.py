"""The timm-import job: import_timm_weights.py's flags, to one checkpoint with its
preprocessing beside it.

timm's safetensors weights (nets/timm_import) go into our net of the same architecture
at --image_size (default: the net's; a position embedding of another grid is resampled
and the report says so); <output_dir>/model.ckpt-0 is written as the Keras import
writes it (cli/import_weights_job.py), with import.json holding the class count, the
class names and timm's pretrained_cfg (mean, std, crop_pct, interpolation, input
size). No logits are compared here (that needs PyTorch): the tests do it against
timm's logits (tests/data/timm, maintainer/timm_goldens.py).
"""
import dataclasses
import datetime
import json
import os
from typing import Optional

from core.errors import UsageError
from cli import import_weights_job
from nets.timm_import import catalog, files, transfer


@dataclasses.dataclass(frozen=True)
class TimmImportJob:
    model_name: str
    timm_weights: Optional[str]
    output_dir: Optional[str]
    overwrite: bool = False
    image_size: Optional[int] = None

    def __post_init__(self):
        if not self.timm_weights:
            raise UsageError('Pass --timm_weights=<timm\'s model.safetensors, its Hugging '
                             'Face snapshot folder, or hf_hub:<id>>.')
        if not self.output_dir:
            raise UsageError('Pass --output_dir, the directory for the imported checkpoint.')


def _record(job: TimmImportJob, located, imported) -> dict:
    return {'model_name': job.model_name, 'timm_weights': located.source,
            'weights_file': os.path.abspath(located.weights),
            'timm_architecture': transfer.architecture_of(located.config),
            'num_classes': imported.num_classes,
            'label_names': transfer.label_names(located.config),
            'pretrained_cfg': transfer.preprocessing_of(located.config),
            'image_size': imported.image_size,
            'resampled': imported.transfer.resampled,
            'time': datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec='seconds')}


def _next_steps(job: TimmImportJob, family, imported) -> str:
    scope = imported.network.relative_name
    if imported.num_classes:
        fine_tune = (f'fine-tune on other classes with --checkpoint_path={job.output_dir} '
                     f'--checkpoint_exclude_scopes={scope}/{family.our_classifier}')
        evaluate = (f'Evaluate or export it ({imported.num_classes} classes) with '
                    f'--checkpoint_path={job.output_dir}; ')
    else:
        fine_tune = (f'train a classifier on it with --checkpoint_path={job.output_dir} '
                     f'--checkpoint_exclude_scopes={scope}/{family.our_classifier} '
                     f'(--trainable_scopes={scope}/{family.our_classifier} for a linear '
                     f'probe)')
        evaluate = 'The file has no classifier (an encoder): '
    return evaluate + fine_tune + '.'


def run(job: TimmImportJob) -> transfer.Imported:
    """Imports and writes; prints the restore report and what to do next."""
    family = catalog.get(job.model_name)
    import_weights_job.check_output(job.output_dir, job.overwrite)
    located = files.locate(job.timm_weights)
    imported = transfer.import_into_ours(job.model_name, family, located, job.image_size)
    print(imported.transfer.report(), flush=True)
    prefix = import_weights_job.write_checkpoint(imported.network.variables,
                                                 job.output_dir)
    record = _record(job, located, imported)
    with open(os.path.join(job.output_dir, import_weights_job.RECORD_FILE), 'w') as f:
        json.dump(record, f, indent=2)
    size = imported.image_size
    print(f'Wrote {prefix} ({len(imported.network.variables)} variables, at '
          f'{size}x{size}) and {import_weights_job.RECORD_FILE} (timm\'s preprocessing: '
          f'{json.dumps(record["pretrained_cfg"])}). {_next_steps(job, family, imported)}',
          flush=True)
    return imported
