"""Averaging checkpoints: the newest N of a training (or given ones) into a new one.

The elementwise mean of the network's float variables over the checkpoints (weights,
batch-norm moving statistics, quantization ranges, and the moving averages when the
training kept them), computed in float64 and stored in each variable's own dtype.
Everything else (global step, optimizer slots, dropout's generator) is the newest
checkpoint's, copied unchanged, so the result is a checkpoint of the same kind, read by
evaluation, export and fine-tuning like any other. The input position (a variant
holding about --shuffle_buffer_size encoded images) is left out: nothing resumes a
stream from an average.

The output directory gets `model.ckpt-<newest step>`, a `checkpoint` state file naming
it, and averaging.json recording the sources. The files are staged, verified, then
moved into place (data before index, state file last), so a reader never sees half a
checkpoint.
"""
import dataclasses
import datetime
import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from core import paths
from core.errors import UsageError
from training.checkpoints import integrity
from training.checkpoints import restore

RECORD_FILE = 'averaging.json'
WRITER = 'average_checkpoints'  # the marker in this tool's staging folders
_STATE_FILE = 'checkpoint'

_VALUE_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'
_STEP_KEYS = ('global_step' + _VALUE_SUFFIX, 'global_step')


def _is_averaged(key: str, dtype: tf.DType, keys) -> bool:
    """The network's float variables and their moving averages; not slots or steps.

    In a TF1 name-based checkpoint a slot is named after its variable
    ('vgg_16/fc8/weights/Momentum'), as is the moving average
    ('vgg_16/fc8/weights/ExponentialMovingAverage').
    """
    if not dtype.is_floating:
        return False
    if restore.OBJECT_GRAPH_KEY in keys:
        return (key.startswith((restore.MODEL_KEY + '/', restore.EMA_KEY + '/'))
                and key.endswith(_VALUE_SUFFIX))
    return key.endswith(restore.EMA_NAME_SUFFIX) or key.rpartition('/')[0] not in keys


@dataclasses.dataclass
class _Source:
    """One checkpoint to average, read once for its table of tensors."""
    prefix: str
    reader: object  # what tf.train.load_checkpoint returns
    dtypes: Dict[str, tf.DType]
    shapes: Dict[str, list]

    @classmethod
    def open(cls, prefix: str) -> '_Source':
        with integrity.naming_damage(prefix):
            reader = tf.train.load_checkpoint(prefix)
            return cls(prefix, reader, reader.get_variable_to_dtype_map(),
                       reader.get_variable_to_shape_map())

    @property
    def object_based(self) -> bool:
        return restore.OBJECT_GRAPH_KEY in self.dtypes

    @property
    def step(self) -> Optional[int]:
        for key in _STEP_KEYS:
            if key in self.dtypes:
                return int(self.reader.get_tensor(key))
        return integrity.step_of(self.prefix)

    def averaged_keys(self) -> Dict[str, tuple]:
        """{key: (shape, dtype name)} of the tensors averaged."""
        return {key: (tuple(self.shapes[key]), dtype.name)
                for key, dtype in self.dtypes.items()
                if _is_averaged(key, dtype, self.dtypes)}

    def read(self, key: str) -> np.ndarray:
        with integrity.naming_damage(self.prefix):
            return self.reader.get_tensor(key)


def _check_one_network(sources: Sequence[_Source]) -> Dict[str, tuple]:
    """The averaged keys, the same in every checkpoint, else the one-line error."""
    first = sources[0]
    expected = first.averaged_keys()
    for other in sources[1:]:
        found = other.averaged_keys()
        if other.object_based != first.object_based:
            difference = 'one is a TF1 name-based checkpoint, the other is not'
        elif found == expected:
            continue
        else:
            key = sorted(set(found) ^ set(expected) or
                         [k for k in expected if expected[k] != found[k]])[0]
            name = key.replace(_VALUE_SUFFIX, '')
            if key in expected and key in found:
                difference = (f'{name}: shape {list(expected[key][0])} {expected[key][1]} '
                              f'against {list(found[key][0])} {found[key][1]}')
            else:
                holder = first if key in expected else other
                difference = f'{name} is only in {holder.prefix}'
        raise UsageError(f'Checkpoints {first.prefix} and {other.prefix} are not of one '
                         f'network ({difference}); average checkpoints of one training '
                         '(one --model_name, class count and --moving_average_decay).')
    if not expected:
        raise UsageError(f'Checkpoint {first.prefix} holds no network variables to '
                         'average; pass checkpoints written by training.')
    return expected


def mean_of(values: Sequence[np.ndarray]) -> np.ndarray:
    """The elementwise mean in float64, stored in the inputs' dtype (for two float32
    values, their mean correctly rounded)."""
    total = np.zeros(values[0].shape, np.float64)
    for value in values:
        total += value.astype(np.float64)
    return (total / len(values)).astype(values[0].dtype)


def newest_intact(checkpoint_dir: str, count: int) -> List[str]:
    """Up to `count` newest intact checkpoints that checkpoint_dir's state file lists,
    oldest first; damaged ones are passed over with one warning."""
    paths.check_input_dir(checkpoint_dir, '--checkpoint_dir',
                          'pass the --train_dir of a training')
    chosen, damaged = [], []
    for _, prefix in reversed(integrity.candidates(checkpoint_dir)):
        problem = integrity.find_damage(prefix)
        if problem is None:
            chosen.append(prefix)
        else:
            damaged.append(f'{prefix} ({problem})')
        if len(chosen) == count:
            break
    if damaged:
        logging.warning('Passing over damaged checkpoint(s) %s.', '; '.join(damaged))
    if not chosen:
        raise UsageError(f'No intact checkpoint found in {checkpoint_dir}; pass the '
                         '--train_dir of a training that saved restore.')
    if len(chosen) < count:
        logging.warning('%s holds %d intact checkpoint(s), fewer than '
                        '--num_checkpoints=%d; averaging those.', checkpoint_dir,
                        len(chosen), count)
    return chosen[::-1]


@dataclasses.dataclass(frozen=True)
class Averaged:
    """What was written: the new checkpoint's prefix, its sources and what was done."""
    prefix: str
    sources: tuple
    steps: tuple
    num_averaged: int  # tensors averaged
    num_copied: int  # tensors copied from the newest


def _check_output(output_dir: str, prefix: str, sources: Sequence[_Source],
                  overwrite: bool):
    """One line when writing would replace a file this tool did not write (without
    --overwrite) or the state file of the checkpoints' own directory (ever)."""
    paths.check_output_dir(output_dir, '--output_dir')
    here = os.path.realpath(output_dir)
    if any(os.path.realpath(os.path.dirname(s.prefix)) == here for s in sources):
        raise UsageError(f'--output_dir={output_dir} holds the checkpoints being '
                         'averaged (its `checkpoint` file is the training\'s); pass '
                         f'another directory, e.g. {os.path.join(output_dir, "averaged")}.')
    existing = [path for path in integrity.checkpoint_files(prefix) if tf.io.gfile.exists(path)]
    state = os.path.join(output_dir, _STATE_FILE)
    ours = tf.io.gfile.exists(os.path.join(output_dir, RECORD_FILE))
    if tf.io.gfile.exists(state) and not ours:
        existing.append(state)
    if existing and not overwrite:
        raise UsageError(f'{existing[0]} exists already; pass --overwrite to replace it, '
                         'or another --output_dir.')


def average(prefixes: Sequence[str], output_dir: str, overwrite: bool = False) -> Averaged:
    """Writes the average of the checkpoints `prefixes` into output_dir (see the module
    docstring); returns what was written."""
    if len(prefixes) < 2:
        raise UsageError(f'Averaging needs at least 2 checkpoints, got {len(prefixes)}; '
                         'pass more, or train longer with a smaller --save_interval_secs.')
    sources = [_Source.open(restore.resolve_checkpoint(p, verify=True))
               for p in prefixes]
    keys = _check_one_network(sources)
    newest = max(sources, key=lambda s: (s.step is not None, s.step or 0))
    prefix = os.path.join(output_dir, f'model.ckpt-{newest.step or 0}')
    _check_output(output_dir, prefix, sources, overwrite)
    paths.remove_all(integrity.staging_leftovers(output_dir, WRITER))
    names, tensors = [], []
    for key, dtype in sorted(newest.dtypes.items()):
        if dtype == tf.variant:  # the input position (see the module docstring)
            continue
        names.append(key)
        tensors.append(tf.constant(mean_of([s.read(key) for s in sources]) if key in keys
                                   else newest.read(key)))
    result = Averaged(prefix, tuple(s.prefix for s in sources),
                      tuple(s.step for s in sources), len(keys), len(names) - len(keys))
    record = json.dumps(dict(
        dataclasses.asdict(result), copied_from=newest.prefix,
        time=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')),
        indent=2) + '\n'
    integrity.write_checkpoint(prefix, names, tensors, writer=WRITER,
                               record=(RECORD_FILE, record))
    return result
