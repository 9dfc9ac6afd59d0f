"""Batch-norm statistics a user can trust, for the jobs that use a checkpoint: the
warning when a run's moving statistics are still mostly their initial values, and
--recompute_batch_norm_statistics=N, which writes a copy of the checkpoint whose moving
means and variances are the exact average of the batch moments over N batches of the
training split (training.evaluation.batch_norm_statistics).

The copy goes to --batch_norm_statistics_dir (default: batch_norm_statistics/ beside the
checkpoint) as `model.ckpt-<step>`, with a `checkpoint` state file and
batch_norm_statistics.json recording its source; every other tensor is the source's.
The source is never changed; a directory holding files this job did not write is
refused. A run killed while writing leaves a staging folder marked as this job's
(training.checkpoints.integrity.staging_leftovers): the next run removes it.
"""
import dataclasses
import json
import os
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf

from cli import run_record
from cli.assembly import DataConfig, assemble_data, quantization_of
from core import checks, paths
from core.errors import UsageError
from deployment import model_deploy
from nets import nets_factory
from training.evaluation import batch_norm_statistics
from training.checkpoints import integrity
from training.checkpoints import restore

@dataclasses.dataclass(frozen=True)
class RecomputeConfig:
    """--recompute_batch_norm_statistics (None: use the checkpoint's statistics) and
    where the recomputed checkpoint goes (None: beside the checkpoint)."""
    recompute_batch_norm_statistics: Optional[int] = None
    batch_norm_statistics_dir: Optional[str] = None

    def __post_init__(self):
        checks.check_at_least(1, unset='the checkpoint\'s statistics',
                              recompute_batch_norm_statistics=(
                                  self.recompute_batch_norm_statistics))


RECORD_FILE = 'batch_norm_statistics.json'
DEFAULT_DIR_NAME = 'batch_norm_statistics'
TRAIN_SPLIT = 'train'
EXPORT_BATCH_SIZE = 32  # export has no data batch size of its own: training's default
WRITER = 'recompute_batch_norm_statistics'  # the marker in this job's staging folders


def _recomputed(prefix: str) -> bool:
    """Whether prefix is a checkpoint this job wrote (its statistics are exact)."""
    record = os.path.join(os.path.dirname(prefix), RECORD_FILE)
    if not tf.io.gfile.exists(record):
        return False
    with tf.io.gfile.GFile(record) as f:
        return json.load(f).get('checkpoint') == os.path.basename(prefix)


def _flag_value(flags_txt: dict, name: str) -> Optional[str]:
    line = flags_txt.get(name)
    return line.split('=', 1)[1] if line and '=' in line else None


def warn_if_immature(model_name: str, checkpoint: str, step: Optional[int]):
    """Logs the immature-statistics warning for a checkpoint of one of our trainings from
    scratch (its directory's flags.txt tells the decay and that no --checkpoint_path
    started it); says nothing of foreign, fine-tuned or recomputed restore."""
    flags_path = os.path.join(os.path.dirname(checkpoint), run_record.FLAGS_FILE)
    if step is None or _recomputed(checkpoint) or not tf.io.gfile.exists(flags_path):
        return
    recorded = run_record.read_flags_file(flags_path)
    if _flag_value(recorded, 'checkpoint_path'):
        return  # fine-tuned: the statistics started from the checkpoint's
    decay = _flag_value(recorded, 'batch_norm_decay')
    warning = batch_norm_statistics.immature_warning(
        nets_factory.batch_norm_of(model_name, float(decay) if decay else None), step)
    if warning:
        logging.warning('%s', warning)


def plan_lines(data: DataConfig) -> list:
    """The training plan's line on the batch norm in use, if the net has one."""
    batch_norm = nets_factory.batch_norm_of(data.model_name, data.batch_norm_decay,
                                            data.batch_norm_epsilon)
    if batch_norm is None:
        return []
    given = data.batch_norm_decay is not None or data.batch_norm_epsilon is not None
    source = 'given' if given else 'the family\'s default'
    return [f'batch norm:   decay {batch_norm.decay:g}, epsilon {batch_norm.epsilon:g} '
            f'({source})']


def warn_if_immature_after_training(data: DataConfig, steps: int):
    """At the end of a training from scratch: the warning, if its statistics are
    immature."""
    warning = batch_norm_statistics.immature_warning(
        nets_factory.batch_norm_of(data.model_name, data.batch_norm_decay), steps)
    if warning:
        logging.warning('%s', warning)


def _check_output(output_dir: str, source: str):
    paths.check_output_dir(output_dir, '--batch_norm_statistics_dir')
    if os.path.realpath(output_dir) == os.path.realpath(os.path.dirname(source)):
        raise UsageError(f'--batch_norm_statistics_dir={output_dir} holds the checkpoint '
                         'itself; pass another directory.')
    paths.remove_all(integrity.staging_leftovers(output_dir, WRITER))
    if (tf.io.gfile.isdir(output_dir) and tf.io.gfile.listdir(output_dir)
            and not tf.io.gfile.exists(os.path.join(output_dir, RECORD_FILE))):
        raise UsageError(f'--batch_norm_statistics_dir={output_dir} holds files this '
                         'tool did not write; pass an empty or new directory.')


def _recompute_network(data: DataConfig, num_classes: int, quantization):
    """The network whose batch norms take each batch's moments (decay 0), drop-path off."""
    spec = nets_factory.get_spec(data.model_name)
    options = ({'drop_path_keep_prob': 1.0}
               if spec.drop_path_option == 'drop_path_keep_prob' else {})
    return nets_factory.get_network_fn(
        data.model_name, num_classes, is_training=True, quantization=quantization,
        batch_norm_decay=0.0, batch_norm_epsilon=data.batch_norm_epsilon, **options)


def _statistic_keys(network, source: str, use_moving_averages: bool) -> dict:
    """{checkpoint key: variable} of the moving statistics, the averaged ones too."""
    statistics = {id(v) for bn in batch_norm_statistics.batch_norms(network)
                  for v in (bn.moving_mean, bn.moving_variance)}
    keys = {}
    for averaged in {False, use_moving_averages}:
        plan = restore.plan_restore(network, source, use_moving_averages=averaged)
        keys.update({key: v for v, key in plan.restored if id(v) in statistics})
    return keys


def recompute_checkpoint(data: DataConfig, checkpoint: str, num_batches: int, *,
                         output_dir: Optional[str], strategy: tf.distribute.Strategy,
                         use_moving_averages: bool = False, quantization=None) -> str:
    """Writes `checkpoint` with recomputed moving statistics (see the module docstring);
    returns the new checkpoint's prefix. data.batch_size is per replica."""
    if nets_factory.batch_norm_of(data.model_name) is None:
        raise UsageError(f'{data.model_name} has no batch norm: drop '
                         '--recompute_batch_norm_statistics.')
    if not checkpoint:
        raise UsageError('Pass --checkpoint_path, the checkpoint whose batch-norm '
                         'statistics to recompute.')
    source = restore.resolve_checkpoint(checkpoint, verify=True)
    output_dir = output_dir or os.path.join(os.path.dirname(source), DEFAULT_DIR_NAME)
    _check_output(output_dir, source)
    replicas = strategy.num_replicas_in_sync
    assembly = assemble_data(dataclasses.replace(
        data, batch_size=data.batch_size * replicas), is_training=True)
    with strategy.scope():
        network = _recompute_network(data, assembly.num_classes, quantization)
        network.build(assembly.image_shape)
        # Layers only training builds (auxiliary heads) may be missing from an inference
        # checkpoint: they run, and only the checkpoint's own tensors are written.
        step = restore.restore_network(network, source, ignore_missing_vars=True,
                                           use_moving_averages=use_moving_averages)
        result = batch_norm_statistics.recompute(network, assembly.input_fn(None),
                                                 num_batches, strategy)
    if result.num_batches < num_batches:
        logging.warning('The training split gave %d batches, not %d.',
                        result.num_batches, num_batches)
    keys = _statistic_keys(network, source, use_moving_averages)
    reader = tf.train.load_checkpoint(source)
    names = sorted(name for name, dtype in reader.get_variable_to_dtype_map().items()
                   if dtype != tf.variant)  # not the input position: nothing resumes here
    tensors = [keys[name].read_value() if name in keys else reader.get_tensor(name)
               for name in names]
    prefix = os.path.join(output_dir, os.path.basename(source))
    record = json.dumps(dict(
        checkpoint=os.path.basename(prefix), source=source, step=step,
        num_batches=result.num_batches, batch_size=data.batch_size, replicas=replicas,
        split=data.dataset_split_name, layers=result.num_layers), indent=2) + '\n'
    integrity.write_checkpoint(prefix, names, [tf.constant(np.asarray(t)) for t in tensors],
                               writer=WRITER, record=(RECORD_FILE, record))
    logging.info('Recomputed the moving statistics of %d batch norms over %d batches of '
                 '%d (%s split, training preprocessing): %s', result.num_layers,
                 result.num_batches, data.batch_size * replicas, data.dataset_split_name,
                 prefix)
    return prefix


@dataclasses.dataclass(frozen=True)
class RecomputeJob:
    """recompute_batch_norm_statistics.py's flags: the data (its split, the training
    split by default), the checkpoint, and the recomputation."""
    data: DataConfig
    checkpoint_path: Optional[str]
    recompute: RecomputeConfig
    use_moving_averages: bool = False
    deployment: Optional[model_deploy.DeploymentConfig] = None


def run(job: RecomputeJob) -> str:
    num_batches = job.recompute.recompute_batch_norm_statistics
    if not num_batches:
        raise UsageError('Pass --recompute_batch_norm_statistics=N, the training batches '
                         'to average the statistics over (e.g. 50).')
    strategy = model_deploy.create_strategy(job.deployment or model_deploy.from_flags())
    return recompute_checkpoint(
        job.data, job.checkpoint_path, num_batches,
        output_dir=job.recompute.batch_norm_statistics_dir, strategy=strategy,
        use_moving_averages=job.use_moving_averages,
        quantization=quantization_of(job.checkpoint_path, quantize=False))
