"""Resuming a run from its --train_dir: the newest checkpoint must be of this very run's
setup, and what a killed or failed save left behind is cleared first."""
import re
from typing import Iterable, List, Mapping, Optional

import tensorflow as tf
from absl import logging

from core import paths
from core.errors import UsageError, tensorflow_reason
from core.naming import slim_name
from training.checkpoints.restore import EMA_KEY, OBJECT_GRAPH_KEY, plan_restore

_SLOTS_PREFIX = 'optimizer/_slots/'


def _slot_keys(keys: Iterable[str]) -> set:
    """Slot names in object-checkpoint keys 'optimizer/_slots/<variable>/<slot>/...'."""
    return {key[len(_SLOTS_PREFIX):].split('/')[1] for key in keys
            if key.startswith(_SLOTS_PREFIX)}


def _network_scope(keys: Iterable[str]) -> Optional[str]:
    """The network's top scope, from slot keys ('LeNet.Sconv1.Sweights' -> 'LeNet')."""
    for key in keys:
        if key.startswith(_SLOTS_PREFIX):
            return key[len(_SLOTS_PREFIX):].split('/')[0].split('.S')[0]
    return None


# A piece of a variable partitioned over parameter servers: 'LeNet/fc3/weights/part_0'.
_PARTITION_PIECE = re.compile(r'/part_\d+$')


def check_resume_fits(checkpoint_path: str, train_dir: str, network: tf.Module,
                      optimizer_slots: Optional[Iterable[str]],
                      has_moving_averages: bool,
                      slots_by_optimizer: Mapping[str, Iterable[str]] = None) -> None:
    """Raises a UsageError naming what differs (network, class count, image channels,
    moving averages, optimizer) when the checkpoint a run would resume from was written
    by a run set up otherwise, and the fix: the matching flag or a new --train_dir.
    optimizer_slots: the slot names of this run's optimizer (None: not compared);
    slots_by_optimizer: each --optimizer's slot names, to name the one trained with."""
    if any(_PARTITION_PIECE.search(slim_name(v)) for v in network.variables):
        # Split over parameter servers: the checkpoint holds whole variables, so names
        # do not line up here; the restore itself still checks every one.
        return
    fresh = 'or pass a new --train_dir to start afresh'
    where = f'--train_dir={train_dir} holds {checkpoint_path}'
    try:
        reader = tf.train.load_checkpoint(checkpoint_path)
        available = reader.get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError) as error:
        raise UsageError(f'{where}, which cannot be read ({tensorflow_reason(error)}); '
                         f'move it away (the checkpoint before it is used then), '
                         f'{fresh}.') from None
    if OBJECT_GRAPH_KEY not in available:
        raise UsageError(f'{where}, a TF1 name-based checkpoint; start from it with '
                         f'--checkpoint_path={checkpoint_path} {fresh}.')
    plan = plan_restore(network, checkpoint_path)
    if plan.mismatched or plan.missing or plan.checkpoint_only:
        classes, channels = plan.class_counts(), plan.image_channels()
        if channels:
            fix = 'pass --use_grayscale' if channels[0] == 1 else 'drop --use_grayscale'
            raise UsageError(f'{where}, trained on images with {channels[0]} channel(s); '
                             f'this run feeds {channels[1]}: {fix} as it was trained, '
                             f'{fresh}.')
        if classes and not plan.missing and not plan.checkpoint_only:
            raise UsageError(f'{where}, trained for {classes[0]} classes; this run has '
                             f'{classes[1]} (the dataset\'s classes minus --labels_offset): '
                             f'pass the --dataset_name and --labels_offset it was trained '
                             f'with, {fresh}.')
        scope = _network_scope(available)
        trained = f' (its variables start with {scope}/)' if scope else ''
        raise UsageError(f'{where}, written for another network{trained}: pass the '
                         f'--model_name (and network options) it was trained with, '
                         f'{fresh}.')
    has_averages = any(key.startswith(EMA_KEY + '/') for key in available)
    if has_averages != has_moving_averages:
        fix = ('pass --moving_average_decay' if has_averages
               else 'drop --moving_average_decay')
        raise UsageError(f'{where}, trained {"with" if has_averages else "without"} '
                         f'moving averages: {fix} as it was trained, {fresh}.')
    slots = _slot_keys(available)
    if optimizer_slots is not None and slots != set(optimizer_slots):
        trained_with = next((name for name, named in (slots_by_optimizer or {}).items()
                             if set(named) == slots), None)
        fix = (f'pass --optimizer={trained_with}' if trained_with
               else 'pass the --optimizer it was trained with')
        raise UsageError(f'{where}, trained with another optimizer: {fix}, {fresh}.')


# --- Leftovers of saves that did not finish. ---

_TEMP_SUFFIX = '_temp'  # TensorFlow writes '<prefix>_temp/part-*' then merges them


def remove_stale_temporaries(train_dir: str) -> List[str]:
    """Removes the '<prefix>_temp' folders a killed save left in train_dir; returns them."""
    if not tf.io.gfile.isdir(train_dir):
        return []
    stale = [tf.io.gfile.join(train_dir, name.rstrip('/'))
             for name in tf.io.gfile.listdir(train_dir)
             if name.rstrip('/').endswith(_TEMP_SUFFIX)]
    for path in stale:
        logging.info('Removing %s, left by a save that did not finish.', path)
        if tf.io.gfile.isdir(path):
            tf.io.gfile.rmtree(path)
        else:
            tf.io.gfile.remove(path)
    return stale


def remove_partial_save(train_dir: str, step: int, checkpoint_name: str = 'model.ckpt'):
    """Removes what a failed save of `step` wrote: its temporary folder and any of its
    files (the checkpoint state file was not updated, so nothing refers to them)."""
    prefix = tf.io.gfile.join(train_dir, f'{checkpoint_name}-{step}')
    paths.remove_all(tf.io.gfile.glob(prefix + '.*') + tf.io.gfile.glob(prefix + _TEMP_SUFFIX))
