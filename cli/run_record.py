"""A train_dir that describes its run.

  flags.txt      every flag of the script with its value, one `--name=value` a line: a
                 `--flagfile` that reproduces the run (later flags on the command line
                 override it, e.g. `--flagfile=<train_dir>/flags.txt --train_dir=/tmp/b`).
  run_info.json  the toolkit's git revision (when it runs from a git checkout), Python
                 and TensorFlow versions, the machine and its devices, the command, the
                 time, and the run's --max_number_of_steps (continuous evaluation stops
                 at a checkpoint of that step).
  events file    the same flags as TensorBoard HParams, so its HParams tab compares runs
                 by their settings.

A run that resumes in a train_dir whose flags.txt differs logs each changed flag (one
line each), then records its own flags. Only the chief writes.
"""
import dataclasses
import datetime
import json
import os
import platform
import socket
import enum
import hashlib
import subprocess
import sys
import time
from typing import Dict, Optional

import tensorflow as tf
from absl import flags, logging
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
from tensorboard.compat.proto import types_pb2
from tensorboard.plugins.hparams import plugin_data_pb2

from cli import flag_help
from core import paths

FLAGS_FILE = 'flags.txt'
RUN_INFO_FILE = 'run_info.json'
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def script_flags(flag_values: flags.FlagValues, module_name: str) -> Dict[str, str]:
    """{flag name: `--name=value` line} of the flags module_name's script offers (its key
    flags: its own and those it adopted). Flags left at a None default have no line."""
    lines = {}
    for flag in flag_values.get_key_flags_for_module(module_name):
        if flag_help.is_alias(flag):  # the original flag has its value
            continue
        serialized = flag.serialize()
        if serialized:
            lines[flag.name] = serialized
    return dict(sorted(lines.items()))


def read_flags_file(path: str, known_names=()) -> Dict[str, str]:
    """{flag name: line} of a flags.txt (comments skipped); `--noX` is flag X's line
    when X is among known_names (a false boolean)."""
    lines = {}
    with tf.io.gfile.GFile(path) as f:
        for line in f.read().splitlines():
            if line.startswith('--'):
                name = line[2:].split('=', 1)[0]
                if '=' not in line and name[2:] in known_names and name not in known_names:
                    name = name[2:]
                lines[name] = line
    return lines


def flag_differences(previous: Dict[str, str], current: Dict[str, str]) -> list:
    """One description per flag whose line differs, e.g. '--learning_rate: 0.1 -> 0.01'."""
    def value(lines, name):
        line = lines.get(name)
        if line is None:
            return '(unset)'
        return line.split('=', 1)[1] if '=' in line else line
    return [f'--{name}: {value(previous, name)} -> {value(current, name)}'
            for name in sorted(set(previous) | set(current))
            if previous.get(name) != current.get(name)]


def git_revision() -> Optional[str]:
    """The toolkit's commit (with '-dirty' for local changes), or None outside git."""
    try:
        result = subprocess.run(
            ['git', '-C', _PROJECT_ROOT, 'describe', '--always', '--dirty', '--abbrev=12'],
            capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    return result.stdout.strip() or None


def run_info(max_number_of_steps: Optional[int]) -> dict:
    """What ran, where and when (devices listed without starting TensorFlow's runtime)."""
    return {
        'toolkit_revision': git_revision(),
        'python': platform.python_version(),
        'tensorflow': tf.__version__,
        'platform': platform.platform(),
        'processor': platform.processor() or platform.machine(),
        'host': socket.gethostname(),
        'devices': [f'{d.device_type}: {d.name}' for d in tf.config.list_physical_devices()],
        'command': [os.path.basename(sys.executable), *sys.argv],
        'started': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
        'max_number_of_steps': max_number_of_steps,
    }


def _write(path: str, text: str):
    with tf.io.gfile.GFile(path + '.tmp', 'w') as f:
        f.write(text)
    tf.io.gfile.rename(path + '.tmp', path, overwrite=True)


@dataclasses.dataclass(frozen=True)
class FlagsRecord:
    """A script's flags for flags.txt: {flag name: `--name=value` line} (script_flags),
    and the same flags' values as HParams take them (bool, int, float or str)."""
    script: str
    lines: Dict[str, str]
    values: Dict[str, object] = dataclasses.field(default_factory=dict)


def _hparam_value(value):
    """A flag's value as an HParam (bool, int, float or str): lists joined with commas
    as on the command line, an enum by its name; None (an unset flag) has none."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return ','.join(map(_list_item, value))
    return value.name if isinstance(value, enum.Enum) else str(value)


def _list_item(value) -> str:
    return value.name if isinstance(value, enum.Enum) else str(value)


def flags_record(flag_values: flags.FlagValues, module_name: str) -> FlagsRecord:
    lines = script_flags(flag_values, module_name)
    values = {name: _hparam_value(flag_values[name].value) for name in lines}
    return FlagsRecord(os.path.basename(module_name), lines,
                       {name: value for name, value in values.items() if value is not None})


def hparams_summary(values: Dict[str, object], start_time_secs: float) -> summary_pb2.Summary:
    """TensorBoard's HParams session-start summary of `values` (bool, number or str).

    Built from the plugin's protos: its summary_v2 module imports TensorBoard's
    TensorFlow stub (about 0.15 s of every run's start-up) to make the same message:
    tag '_hparams_/session_start_info', plugin 'hparams' version 0, a [0] float tensor,
    the group named by the sha256 of the values as sorted JSON."""
    group = hashlib.sha256(json.dumps(values, sort_keys=True, separators=(',', ':'))
                           .encode('utf-8')).hexdigest()
    start = plugin_data_pb2.SessionStartInfo(group_name=group,
                                             start_time_secs=start_time_secs)
    for name in sorted(values):
        value = values[name]
        field = ('bool_value' if isinstance(value, bool) else
                 'number_value' if isinstance(value, (int, float)) else 'string_value')
        setattr(start.hparams[name], field, value)
    content = plugin_data_pb2.HParamsPluginData(version=0, session_start_info=start)
    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
        plugin_name='hparams', content=content.SerializeToString()))
    empty = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=(
        tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=0)])))
    summary = summary_pb2.Summary()
    summary.value.add(tag='_hparams_/session_start_info', metadata=metadata, tensor=empty)
    return summary


def write_hparams(train_dir: str, recorded: FlagsRecord):
    """The run's flags as a TensorBoard HParams summary (plugin 'hparams', step 0) in an
    events file of its own in train_dir.

    Written as TFRecords of Event protos, not with tf.summary: a summary writer starts
    TensorFlow's runtime, and the deployment configures devices after this (clones on
    CPU split the CPU, multi-worker training sets up collectives), which a started
    runtime refuses."""
    now = time.time()
    path = os.path.join(train_dir, f'events.out.tfevents.{int(now):010d}.'
                                   f'{socket.gethostname()}.{os.getpid()}.hparams')
    # An events file: TFRecords of Event protos, the first naming the format.
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(event_pb2.Event(wall_time=now, file_version='brain.Event:2')
                     .SerializeToString())
        writer.write(event_pb2.Event(wall_time=now, step=0, summary=hparams_summary(
            recorded.values, now)).SerializeToString())


def record(train_dir: str, flag_values: flags.FlagValues, module_name: str,
           max_number_of_steps: Optional[int]) -> list:
    """Writes flags.txt and run_info.json into train_dir (created if missing), after
    logging how the flags differ from the run recorded there; returns the differences."""
    return write(train_dir, flags_record(flag_values, module_name), max_number_of_steps)


def write(train_dir: str, recorded: FlagsRecord, max_number_of_steps: Optional[int]) -> list:
    """record() of flags already read."""
    paths.check_output_dir(train_dir, '--train_dir')
    tf.io.gfile.makedirs(train_dir)
    current = recorded.lines
    flags_path = os.path.join(train_dir, FLAGS_FILE)
    differences = []
    if tf.io.gfile.exists(flags_path):
        differences = flag_differences(read_flags_file(flags_path, set(current)), current)
        if differences:
            logging.warning('%d flag(s) differ from the run recorded in %s:',
                            len(differences), flags_path)
            for difference in differences:
                logging.warning('  %s', difference)
    script = recorded.script
    _write(flags_path, f'# The flags of {script} for this run; reproduce it with\n'
                       f'#   python {script} --flagfile={flags_path}\n'
           + '\n'.join(current.values()) + '\n')
    _write(os.path.join(train_dir, RUN_INFO_FILE),
           json.dumps(run_info(max_number_of_steps), indent=2) + '\n')
    if recorded.values:
        write_hparams(train_dir, recorded)
    return differences


def recorded_max_steps(train_dir: str) -> Optional[int]:
    """The --max_number_of_steps of the run last started in train_dir, None if unknown."""
    try:
        with tf.io.gfile.GFile(os.path.join(train_dir, RUN_INFO_FILE)) as f:
            value = json.load(f).get('max_number_of_steps')
    except (tf.errors.OpError, OSError, ValueError):
        return None
    return int(value) if value is not None else None
