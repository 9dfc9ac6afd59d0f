"""Restoring a network from a checkpoint by slim variable name.

Two kinds of checkpoint hold a network's weights: TF1 name-based ones (TF-Slim's model
zoo), keyed by variable name, and this toolkit's TF2 object checkpoints, keyed by the
attribute path from the checkpoint's root ('model/conv1/weights/.ATTRIBUTES/...').
Both are read by slim name here, so exclude prefixes mean the same for either.
"""
from typing import Dict, Iterable, Optional, Sequence

import tensorflow as tf
from absl import logging

from core.errors import UsageError
from core.naming import slim_name

MODEL_KEY = 'model'  # the network's attribute in every checkpoint this toolkit writes
EMA_KEY = 'ema'  # the moving averages' attribute (deployment.moving_averages)
EMA_NAME_SUFFIX = '/ExponentialMovingAverage'  # TF1's shadow names
_OBJECT_GRAPH_KEY = '_CHECKPOINTABLE_OBJECT_GRAPH'
_VALUE_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'


def resolve_checkpoint(path: str) -> str:
    """A checkpoint prefix from a prefix or a directory (its latest checkpoint)."""
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise UsageError(f'No checkpoint found in {path}; train first or pass a '
                             f'checkpoint prefix such as {path}/model.ckpt-1000.')
        return latest
    if not tf.io.gfile.exists(path + '.index'):
        raise UsageError(f'Checkpoint {path} does not exist (no {path}.index); pass a '
                         f'checkpoint prefix or a directory holding checkpoints.')
    return path


def _object_checkpoint_keys(module: tf.Module, use_moving_averages: bool) -> Dict[str, str]:
    """slim name -> key in an object checkpoint whose root holds `module` as 'model'
    (or, for the averages, an ExponentialMovingAverage of module.variables as 'ema')."""
    if use_moving_averages:
        return {slim_name(v): f'{EMA_KEY}/shadows/{i}{_VALUE_SUFFIX}'
                for i, v in enumerate(module.variables)}
    keys = {}
    for path, variable in module._flatten(with_path=True,  # pylint: disable=protected-access
                                          predicate=lambda v: isinstance(v, tf.Variable)):
        keys.setdefault(slim_name(variable),
                        '/'.join([MODEL_KEY, *map(str, path)]) + _VALUE_SUFFIX)
    return keys


def _matches(name: str, prefixes: Iterable[str]) -> bool:
    return any(name.startswith(prefix.strip()) for prefix in prefixes if prefix.strip())


def restore_network(network: tf.Module, checkpoint_path: str, *,
                    exclude_scopes: Sequence[str] = (),
                    ignore_missing_vars: bool = False,
                    use_moving_averages: bool = False) -> Optional[int]:
    """Assigns the network's variables from a checkpoint; returns its global step if known.

    Variables under an excluded scope keep their values. Missing variables are an error
    unless ignore_missing_vars; shape mismatches are always an error, listed together.
    With use_moving_averages, each variable takes its exponential moving average
    (slim's --moving_average_decay at evaluation).
    """
    checkpoint_path = resolve_checkpoint(checkpoint_path)
    reader = tf.train.load_checkpoint(checkpoint_path)
    available = reader.get_variable_to_shape_map()
    object_based = _OBJECT_GRAPH_KEY in available
    if object_based:
        keys = _object_checkpoint_keys(network, use_moving_averages)
    else:
        suffix = EMA_NAME_SUFFIX if use_moving_averages else ''
        keys = {slim_name(v): slim_name(v) + suffix for v in network.variables}
    missing, mismatched, assignments = [], [], []
    for variable in network.variables:
        name = slim_name(variable)
        if _matches(name, exclude_scopes):
            continue
        key = keys[name]
        if key not in available:
            missing.append(name)
        elif list(available[key]) != variable.shape.as_list():
            mismatched.append(f'{name}: checkpoint {list(available[key])} vs model '
                              f'{variable.shape.as_list()}')
        else:
            assignments.append((variable, key))
    if mismatched:
        raise UsageError(
            f'Checkpoint {checkpoint_path} does not fit the model ({"; ".join(mismatched)}); '
            f'if only the logits differ (another class count), leave them out with '
            f'--checkpoint_exclude_scopes, or match the class count with --labels_offset '
            f'(e.g. 1 for a 1000-class net on data with a background class).')
    if missing and not ignore_missing_vars:
        shown = ', '.join(missing[:5]) + (' ...' if len(missing) > 5 else '')
        what = 'moving averages of ' if use_moving_averages else ''
        fix = ('train with --moving_average_decay or evaluate without it'
               if use_moving_averages else 'check --model_name, or pass --ignore_missing_vars')
        raise UsageError(
            f'Checkpoint {checkpoint_path} lacks {len(missing)} {what}the model\'s '
            f'variables ({shown}); {fix}.')
    for name in missing:
        logging.warning('Variable %s is not in %s; keeping its initial value.', name,
                        checkpoint_path)
    for variable, key in assignments:
        variable.assign(reader.get_tensor(key))
    logging.info('Restored %d variables from %s.', len(assignments), checkpoint_path)
    step_key = 'global_step' + (_VALUE_SUFFIX if object_based else '')
    return int(reader.get_tensor(step_key)) if step_key in available else None
