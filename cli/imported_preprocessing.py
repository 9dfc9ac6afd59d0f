"""The preprocessing an imported checkpoint's weights were evaluated with: the
pretrained_cfg that import_timm_weights.py keeps in import.json beside the checkpoint,
as keyword arguments of our family's preprocess_image (mean, std, crop_fraction,
interpolation, those the family takes). Evaluation, export and fine-tuning from such a
checkpoint use it; a fine-tuning carries it into its train_dir (preprocessing.json), so
that evaluating and exporting that run use it too. A --preprocessing_name given wins
(the family's own values then apply).
"""
import inspect
import json
import os
from typing import Optional, Tuple

from absl import logging

from cli import import_weights_job
from preprocessing import registry

# pretrained_cfg's key -> the keyword of our families' preprocess_image.
KEYWORDS = {'mean': 'mean', 'std': 'std', 'crop_pct': 'crop_fraction',
            'interpolation': 'interpolation'}
Options = Tuple[Tuple[str, object], ...]
# What a fine-tuning from an imported checkpoint writes into its train_dir.
CARRIED_FILE = 'preprocessing.json'


def record_of(checkpoint_path: Optional[str]) -> Optional[dict]:
    """import.json beside the checkpoint (a directory or a prefix), if a timm import
    wrote one."""
    if not checkpoint_path:
        return None
    directory = (checkpoint_path if os.path.isdir(checkpoint_path)
                 else os.path.dirname(checkpoint_path))
    for name in (import_weights_job.RECORD_FILE, CARRIED_FILE):
        try:
            with open(os.path.join(directory, name)) as f:
                record = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get('pretrained_cfg'):
            return record
    return None


def carry(checkpoint_path: Optional[str], train_dir: str):
    """Writes the checkpoint's pretrained_cfg into train_dir/preprocessing.json (a
    fine-tuning's, from an imported checkpoint)."""
    record = record_of(checkpoint_path)
    if record is None:
        return
    with open(os.path.join(train_dir, CARRIED_FILE), 'w') as f:
        json.dump({'pretrained_cfg': record['pretrained_cfg'],
                   'from_checkpoint': checkpoint_path}, f, indent=2)


def options(checkpoint_path: Optional[str], family: str, named: bool) -> Options:
    """The keyword arguments for `family` from the checkpoint's pretrained_cfg; none when
    --preprocessing_name was given (named) or there is no import.json. Logs which."""
    record = record_of(checkpoint_path)
    cfg = (record or {}).get('pretrained_cfg') or {}
    if not cfg:
        return ()
    if named:
        logging.info('Preprocessing: %s with its own values (--preprocessing_name given; '
                     'the imported pretrained_cfg not applied).', family)
        return ()
    takes = inspect.signature(registry.lookup(family)).parameters
    chosen = tuple((ours, tuple(cfg[theirs]) if isinstance(cfg[theirs], list)
                    else cfg[theirs])
                   for theirs, ours in KEYWORDS.items() if theirs in cfg and ours in takes)
    given = [k for k in KEYWORDS if k in cfg]
    if chosen:
        logging.info('Preprocessing: %s with the imported pretrained_cfg: %s%s.', family,
                     ', '.join(f'{k}={v}' for k, v in chosen),
                     '' if len(chosen) == len(given) else
                     ' (the family takes none of its other values)')
    else:
        logging.info('Preprocessing: %s with its own values; the family takes none of the '
                     'imported pretrained_cfg (%s).', family, ', '.join(given))
    return chosen
