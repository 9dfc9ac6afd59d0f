"""The Keras-import job: import_keras_weights.py's flags, to one checked checkpoint.

A Keras application's weights (a file, or Keras's ImageNet download) go into our net of
the same architecture (nets/keras_import), which must then give the Keras model's logits
on a seeded input; only then is <output_dir>/model.ckpt-0 written, a name-based
checkpoint under our variable names (as TF-Slim's model zoo ships them), which
--checkpoint_path=<output_dir> of training, evaluation and export takes.
"""
import dataclasses
import datetime
import json
import os
import shutil
import tempfile
from typing import Optional

import tensorflow as tf

from core import paths
from core.errors import UsageError
from core.naming import slim_name
from nets import nets_factory
from nets.keras_import import catalog, transfer
from training.checkpoints import integrity

IMAGENET = 'imagenet'
CHECKPOINT_PREFIX = 'model.ckpt-0'  # a step, so a directory resolves to it
RECORD_FILE = 'import.json'
_STATE_FILE = 'checkpoint'


@dataclasses.dataclass(frozen=True)
class ImportJob:
    """Which net, from which Keras weights, into which directory; check_image_size
    (default: the net's) is the size the logits are compared at."""
    model_name: str
    keras_weights: Optional[str]
    output_dir: Optional[str]
    overwrite: bool = False
    check_image_size: Optional[int] = None
    seed: int = 0

    def __post_init__(self):
        if not self.keras_weights:
            raise UsageError('Pass --keras_weights=<the Keras application\'s .h5 or '
                             '.weights.h5 file>, or --keras_weights=imagenet.')
        if not self.output_dir:
            raise UsageError('Pass --output_dir, the directory for the imported checkpoint.')


@dataclasses.dataclass(frozen=True)
class Imported:
    prefix: str
    weights_file: str
    num_copied: int
    unfilled: tuple
    agreement: transfer.LogitsAgreement


def check_output(output_dir: str, overwrite: bool):
    """One line when output_dir holds anything and --overwrite is not given."""
    paths.check_output_dir(output_dir, '--output_dir')
    if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
        raise UsageError(f'--output_dir={output_dir} is not empty; pass --overwrite to '
                         f'replace the imported checkpoint there, or an empty directory.')


def write_checkpoint(variables, output_dir: str) -> str:
    """Saves the variables under their slim names into a staging directory, checks it
    reads back, then moves it into place (index last) with the state file."""
    os.makedirs(output_dir, exist_ok=True)
    prefix = os.path.join(output_dir, CHECKPOINT_PREFIX)
    staging = tempfile.mkdtemp(prefix='.import-', dir=output_dir)
    try:
        staged = os.path.join(staging, CHECKPOINT_PREFIX)
        names = [slim_name(v) for v in variables]
        tf.raw_ops.SaveV2(prefix=staged, tensor_names=names,
                          shape_and_slices=[''] * len(names),
                          tensors=[v.read_value() for v in variables])
        problem = integrity.find_damage(staged)
        if problem:
            raise OSError(f'the imported checkpoint does not read back: {problem}')
        for path in integrity.data_files(prefix) + [prefix + '.index']:
            if os.path.exists(path):
                os.remove(path)
        for path in integrity.data_files(staged):
            os.replace(path, prefix + path[len(staged):])
        os.replace(staged + '.index', prefix + '.index')
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    name = json.dumps(CHECKPOINT_PREFIX)
    with open(os.path.join(output_dir, _STATE_FILE), 'w') as f:
        f.write(f'model_checkpoint_path: {name}\nall_model_checkpoint_paths: {name}\n')
    return prefix


# The logits' difference that float32 rounding inside the net reaches, in units of their
# movement under rounding of the input: measured 0.6-1.3 (efficientnet_b0, _b7, _v2_b0,
# _v2_s with random or batch statistics; mobilenet_v1_025); a mapping error is ~1.
_ROUNDING_GROWTH = 10


def _disagreement(job, counterpart, keras_model, size: int, agreement) -> str:
    """Why the logits differ, in one line: float32 rounding that the weights magnify
    (measured by how far Keras's own logits move under rounding of the input), or the
    mapping."""
    sensitivity = transfer.rounding_sensitivity(counterpart, keras_model, size, job.seed)
    head = (f'{job.model_name} does not reproduce Keras\'s logits after the import '
            f'({agreement.describe()}); nothing was written. Keras\'s own logits move by '
            f'{sensitivity:.2g} of the largest when its input moves by float32 rounding')
    if agreement.relative <= _ROUNDING_GROWTH * sensitivity:
        return (f'{head}: the difference is of the size float32 rounding reaches in a '
                f'net this sensitive (weights whose batch-norm statistics do not '
                f'normalise, e.g. random ones), not a sign of a wrong mapping.')
    return (f'{head}, far less than the difference: a bug of its Keras mapping '
            f'(nets/keras_import); please report it.')


def run(job: ImportJob) -> Imported:
    """Imports, checks the logits, writes; prints the restore report and what to do."""
    counterpart = catalog.get(job.model_name)
    check_output(job.output_dir, job.overwrite)
    weights_file = (transfer.imagenet_weights(counterpart) if job.keras_weights == IMAGENET
                    else job.keras_weights)
    size = job.check_image_size or nets_factory.get_spec(job.model_name).default_image_size
    keras_model = counterpart.build_keras(size)
    transfer.load_weights_file(keras_model, weights_file)
    ours = transfer.build_ours(counterpart, size)
    moved = transfer.pair(counterpart, keras_model, ours)
    moved.copy()
    print(moved.report(), flush=True)
    agreement = transfer.logits_agreement(counterpart, keras_model, ours.network, size,
                                          seed=job.seed)
    if not agreement.agrees:
        raise UsageError(_disagreement(job, counterpart, keras_model, size, agreement))
    prefix = write_checkpoint(ours.network.variables, job.output_dir)
    with open(os.path.join(job.output_dir, RECORD_FILE), 'w') as f:
        json.dump({'model_name': job.model_name, 'keras_weights': weights_file,
                   'keras_application': counterpart.application.__name__,
                   'application_options': dict(counterpart.application_options),
                   'logits_relative_difference': agreement.relative,
                   'unfilled': list(moved.unfilled),
                   'time': datetime.datetime.now(datetime.timezone.utc).isoformat(
                       timespec='seconds')}, f, indent=2)
    print(f'Logits equal Keras\'s at {size}x{size}: {agreement.describe()}. Wrote {prefix} '
          f'({len(ours.network.variables)} variables, 1000 classes). Evaluate or export it '
          f'with --checkpoint_path={job.output_dir} --labels_offset=1 on imagenet; '
          f'fine-tune on other classes with --checkpoint_path={job.output_dir} '
          f'--checkpoint_exclude_scopes={",".join(counterpart.fine_tune_exclude_scopes())}.',
          flush=True)
    return Imported(prefix, weights_file, len(moved.pairs), tuple(moved.unfilled),
                    agreement)
