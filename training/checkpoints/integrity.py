"""The last good checkpoint: finding damaged checkpoints (truncated, emptied, corrupted
or missing files) and the newest intact one, and repairing the train_dir's `checkpoint`
state file so it lists only checkpoints that exist.

A checkpoint is intact when its .index and every .data shard are there and every
tensor reads back with its checksum. Reading them all costs about a read of the files:
0.07 s for 205 MB (a ResNet-50 with its momentum slots) from the page cache, measured;
from a cold disk, the disk's read speed.

Damaged files are never deleted. A save of the same step would overwrite them, so
`set_aside` moves them into damaged_checkpoints/ first.
"""
import contextlib
import dataclasses
import datetime
import json
import os
import re
import shutil
import tempfile
import time
from typing import List, Optional, Sequence, Tuple

import tensorflow as tf

from core.errors import UsageError, tensorflow_reason

DAMAGED_DIR = 'damaged_checkpoints'
_STATE_FILE = 'checkpoint'  # TensorFlow's name for the state file
_STEP = re.compile(r'-(\d+)$')
_DATA_SHARDS = '.data-?????-of-?????'
# What reading a damaged checkpoint raises: TensorFlow's errors, and the checkpoint
# reader's IndexError ('Read less bytes than requested') on a truncated shard.
READ_ERRORS = (tf.errors.OpError, IndexError)


def step_of(prefix: str) -> Optional[int]:
    match = _STEP.search(prefix)
    return int(match.group(1)) if match else None


def data_files(prefix: str) -> List[str]:
    return sorted(tf.io.gfile.glob(prefix + _DATA_SHARDS))


def files_present(prefix: str) -> bool:
    """Whether the .index and every .data shard it was written with exist."""
    shards = data_files(prefix)
    expected = int(shards[0].rsplit('-of-', 1)[1]) if shards else 0
    return tf.io.gfile.exists(prefix + '.index') and 0 < len(shards) == expected


class _IndexUnreadable(Exception):
    """The .index (the table of the checkpoint's tensors) cannot be read."""


def _read_every_tensor(prefix: str):
    """Reads each tensor, which checks its checksum."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        dtypes = reader.get_variable_to_dtype_map()
    except tf.errors.NotFoundError:
        raise
    except READ_ERRORS as error:
        raise _IndexUnreadable(tensorflow_reason(error)) from None
    for key, dtype in dtypes.items():
        if dtype == tf.variant:  # the input position, which the reader cannot return
            tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=[key], shape_and_slices=[''],
                                 dtypes=[dtype])
        else:
            reader.get_tensor(key)


def find_damage(prefix: str) -> Optional[str]:
    """None when the checkpoint is intact; else what is wrong, naming its files, e.g.
    'model.ckpt-6.data-00000-of-00001 is truncated (1000 bytes)'."""
    if not tf.io.gfile.exists(prefix + '.index'):
        remaining = [os.path.basename(path) for path in data_files(prefix)]
        still = (f'; {", ".join(remaining)} {"is" if len(remaining) == 1 else "are"} still '
                 'there' if remaining else '')
        return f'{os.path.basename(prefix)}.index is missing{still}'
    try:
        _read_every_tensor(prefix)
    except _IndexUnreadable as error:
        return f'{os.path.basename(prefix)}.index is unreadable ({error})'
    except READ_ERRORS as error:
        return _describe_read_error(prefix, error)
    return None


def _describe_read_error(prefix: str, error: Exception) -> str:
    name = os.path.basename(prefix)
    reason = tensorflow_reason(error)
    shards = data_files(prefix)
    names = [os.path.basename(path) for path in shards]
    if isinstance(error, tf.errors.NotFoundError) or 'No such file' in reason:
        missing = re.search(r'(\S+\.data-\d{5}-of-\d{5})', reason)
        return f'{os.path.basename(missing.group(1)) if missing else name} is missing'
    if 'Read less bytes' in reason:
        sizes = [tf.io.gfile.stat(path).length for path in shards]
        if len(shards) == 1:
            return (f'{names[0]} is {"empty" if sizes[0] == 0 else "truncated"} '
                    f'({sizes[0]} bytes)')
        return 'a data file is truncated (' + ', '.join(
            f'{n}: {size} bytes' for n, size in zip(names, sizes)) + ')'
    if re.search(r'[Cc]hecksum|parse|decode', reason):
        return f'{", ".join(names)} fails its checksum (corrupted bytes)'
    return f'it cannot be read: {reason[:200]}'


def candidates(train_dir: str, unlisted: bool = False) -> List[Tuple[int, str]]:
    """(step, prefix) of every checkpoint the state file lists (it may have lost its
    files), oldest first. With unlisted, also those whose files are in train_dir (left
    by a save killed before it listed its checkpoint, or listed in a lost state file);
    only the training may ask, as it knows no save is under way."""
    state = read_state(train_dir)
    listed = list(state.all_model_checkpoint_paths) if state else []
    if state:
        listed.append(state.model_checkpoint_path)
    on_disk = []
    if unlisted:
        on_disk += [path[:-len('.index')] for path in
                    tf.io.gfile.glob(os.path.join(train_dir, '*.index'))]
        on_disk += [path.rsplit('.data-', 1)[0] for path in
                    tf.io.gfile.glob(os.path.join(train_dir, '*' + _DATA_SHARDS))]
    found = {}
    for prefix in listed + on_disk:
        step = step_of(prefix)
        if step is not None:
            found.setdefault(os.path.normpath(prefix), step)
    return sorted((step, prefix) for prefix, step in found.items())


def read_state(train_dir: str):
    """The `checkpoint` state file's contents, or None if missing or unreadable."""
    try:
        return tf.train.get_checkpoint_state(train_dir)
    except (tf.errors.OpError, ValueError):
        return None


@dataclasses.dataclass(frozen=True)
class Search:
    """The newest intact checkpoint of a train_dir, and the damaged ones newer than it."""
    train_dir: str
    intact: Optional[str]
    damaged: Tuple[Tuple[str, str], ...] = ()  # (prefix, what is wrong), newest first

    def describe_damage(self) -> str:
        """E.g. 'Checkpoint /t/model.ckpt-6 is damaged (model.ckpt-6.index is missing)'."""
        if len(self.damaged) == 1:
            prefix, problem = self.damaged[0]
            return f'Checkpoint {prefix} is damaged ({problem})'
        listed = ' and '.join(f'{prefix} ({problem})' for prefix, problem in self.damaged)
        return f'Checkpoints {listed} are damaged'

    def fallback_message(self, using: str, kept: str = 'are left in place') -> str:
        """The one warning line of a fallback; using: e.g. 'resuming from'."""
        return (f'{self.describe_damage()}; {using} {self.intact}, the newest intact '
                f'checkpoint; the damaged files {kept}.')

    def nothing_intact_error(self, flag: str) -> UsageError:
        """flag: the one naming the directory, e.g. '--train_dir'."""
        return UsageError(f'{self.describe_damage()}, and {self.train_dir} holds no intact '
                          f'checkpoint; pass another {flag}, or move the damaged files '
                          f'and the `checkpoint` file away to start afresh there.')


def newest_intact(train_dir: str, unlisted: bool = False) -> Search:
    """Verifies the checkpoints of train_dir newest first, up to the first intact one
    (unlisted: see candidates)."""
    damaged = []
    for _, prefix in reversed(candidates(train_dir, unlisted)):
        problem = find_damage(prefix)
        if problem is None:
            return Search(train_dir, prefix, tuple(damaged))
        damaged.append((prefix, problem))
    return Search(train_dir, None, tuple(damaged))


def damaged_checkpoint_error(prefix: str, problem: str) -> UsageError:
    return UsageError(f'Checkpoint {prefix} is damaged ({problem}); pass another '
                      f'checkpoint, or its directory {os.path.dirname(prefix) or "."} to '
                      f'use the newest intact one there.')


def raise_if_damaged(prefix: str):
    """Raises the one-line error naming what is damaged, if the checkpoint is (after
    reading it failed: tells damage from other errors)."""
    problem = find_damage(prefix)
    if problem is not None:
        raise damaged_checkpoint_error(prefix, problem) from None


@contextlib.contextmanager
def naming_damage(prefix: str):
    """Reading `prefix` inside: a failure caused by damage becomes the one-line error
    naming it; other errors pass unchanged."""
    try:
        yield
    except READ_ERRORS:
        raise_if_damaged(prefix)
        raise


# --- Repairing the state file and keeping damaged files from being overwritten. ---

def repair_state(search: Search) -> bool:
    """Rewrites the `checkpoint` state file to list only checkpoints whose files exist,
    none newer than search.intact, which becomes the latest; returns whether anything
    changed. Timestamps (which CheckpointManager's deletion goes by) are kept."""
    train_dir, intact = search.train_dir, search.intact
    state = read_state(train_dir)
    old_paths = [os.path.normpath(p) for p in (state.all_model_checkpoint_paths
                                               if state else [])]
    old_stamps = list(state.all_model_checkpoint_timestamps) if state else []
    stamps = dict(zip(old_paths, old_stamps)) if len(old_stamps) == len(old_paths) else {}
    damaged = {os.path.normpath(prefix) for prefix, _ in search.damaged}
    kept = [path for path in old_paths
            if path not in damaged and step_of(path) is not None
            and step_of(path) <= step_of(intact) and files_present(path)]
    if os.path.normpath(intact) not in kept:
        kept.append(os.path.normpath(intact))
    kept.sort(key=step_of)
    latest = os.path.normpath(state.model_checkpoint_path) if state else None
    if state and kept == old_paths and latest == os.path.normpath(intact):
        return False
    if stamps or not old_paths:  # timestamps are all or none
        for path in kept:
            stamps.setdefault(path, _index_mtime(path))
    # CheckpointManager forgets entries not newer than this: keep it below all of them.
    preserved = min([state.last_preserved_timestamp if state else time.time()]
                    + [stamp - 1 for stamp in stamps.values()])
    _write_state(train_dir, intact, kept, [stamps[p] for p in kept] if stamps else [],
                 preserved)
    return True


def _index_mtime(prefix: str) -> float:
    return tf.io.gfile.stat(prefix + '.index').mtime_nsec / 1e9


def _relative(train_dir: str, path: str) -> str:
    return (os.path.basename(path) if os.path.dirname(path) == os.path.normpath(train_dir)
            else path)


def _write_state(train_dir: str, latest: str, paths: Sequence[str],
                 timestamps: Sequence[float], last_preserved: float):
    """The text proto TensorFlow writes, written atomically (temporary file, rename)."""
    quoted = lambda path: json.dumps(_relative(train_dir, path),  # noqa: E731
                                     ensure_ascii=False)
    lines = [f'model_checkpoint_path: {quoted(latest)}']
    lines += [f'all_model_checkpoint_paths: {quoted(path)}' for path in paths]
    lines += [f'all_model_checkpoint_timestamps: {stamp!r}' for stamp in timestamps]
    lines.append(f'last_preserved_timestamp: {last_preserved!r}')
    path = os.path.join(train_dir, _STATE_FILE)
    with tf.io.gfile.GFile(path + '.tmp', 'w') as f:
        f.write('\n'.join(lines) + '\n')
    tf.io.gfile.rename(path + '.tmp', path, overwrite=True)


def set_aside(prefix: str, listed: Sequence[str]) -> List[str]:
    """Moves the files of checkpoint `prefix`, if any are there and the state file does
    not list it (a damaged checkpoint the training went back from), into
    <train_dir>/damaged_checkpoints/<time>/ before a save of the same step overwrites
    them; returns where they went."""
    if os.path.normpath(prefix) in {os.path.normpath(path) for path in listed}:
        return []
    files = [path for path in [prefix + '.index', *data_files(prefix)]
             if tf.io.gfile.exists(path)]
    if not files:
        return []
    stamp = datetime.datetime.now().strftime('%Y%m%d-%H%M%S-%f')
    target = os.path.join(os.path.dirname(prefix), DAMAGED_DIR, stamp)
    tf.io.gfile.makedirs(target)
    moved = []
    for path in files:
        moved.append(os.path.join(target, os.path.basename(path)))
        tf.io.gfile.rename(path, moved[-1])
    return moved


# --- Writing a checkpoint of named tensors (averaged, recomputed) in one piece. ---

def write_text(path: str, text: str):
    """Writes path through a temporary file, so a reader sees the old text or the new."""
    with tf.io.gfile.GFile(path + '.tmp', 'w') as f:
        f.write(text)
    tf.io.gfile.rename(path + '.tmp', path, overwrite=True)


def checkpoint_files(prefix: str) -> List[str]:
    return [prefix + '.index', *data_files(prefix)]


def _move_into_place(staged: str, prefix: str):
    """Data files first, the index last: until the index is there, there is no
    checkpoint; an old checkpoint of that name loses its index first."""
    for path in checkpoint_files(prefix):
        if tf.io.gfile.exists(path):
            tf.io.gfile.remove(path)
    for path in data_files(staged):
        tf.io.gfile.rename(path, prefix + path[len(staged):], overwrite=True)
    tf.io.gfile.rename(staged + '.index', prefix + '.index', overwrite=True)


STAGING_PREFIX = '.staging-'  # the folder a checkpoint is written into first
STAGING_MARKER = 'written_by'  # its first file: the name of the tool writing it


def _read_marker(folder: str) -> Optional[str]:
    path = os.path.join(folder, STAGING_MARKER)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return f.read()


def staging_leftovers(output_dir: str, writer: str) -> List[str]:
    """The staging folders in output_dir that writes by `writer` left when killed: those
    whose marker names it, and those killed before the marker had content (nothing else
    in them)."""
    if not tf.io.gfile.isdir(output_dir):
        return []
    found = []
    for name in tf.io.gfile.listdir(output_dir):
        folder = os.path.join(output_dir, name.rstrip('/'))
        if not name.startswith(STAGING_PREFIX) or not tf.io.gfile.isdir(folder):
            continue
        marker = _read_marker(folder)
        others = set(tf.io.gfile.listdir(folder)) - {STAGING_MARKER}
        if marker == writer or (not marker and not others):
            found.append(folder)
    return found


def write_checkpoint(prefix: str, names: Sequence[str], tensors: Sequence, *,
                     writer: str, record: Optional[Tuple[str, str]] = None):
    """Writes the tensors under their names as the checkpoint `prefix`: staged beside it
    in a folder whose marker names `writer` (see staging_leftovers), read back in full,
    then moved into place, and named by the directory's state file. `record`, a file
    (name, text) describing the checkpoint, goes into place first: a directory holding
    any of the checkpoint's files holds its record."""
    output_dir = os.path.dirname(prefix)
    tf.io.gfile.makedirs(output_dir)
    staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=output_dir)
    try:
        with tf.io.gfile.GFile(os.path.join(staging, STAGING_MARKER), 'w') as f:
            f.write(writer)
        staged = os.path.join(staging, os.path.basename(prefix))
        tf.raw_ops.SaveV2(prefix=staged, tensor_names=list(names),
                          shape_and_slices=[''] * len(names), tensors=list(tensors))
        problem = find_damage(staged)
        if problem:
            raise OSError(f'the written checkpoint does not read back: {problem}')
        if record:
            name, text = record
            write_text(os.path.join(staging, name), text)
            tf.io.gfile.rename(os.path.join(staging, name), os.path.join(output_dir, name),
                               overwrite=True)
        _move_into_place(staged, prefix)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    name = json.dumps(os.path.basename(prefix))
    write_text(os.path.join(output_dir, _STATE_FILE),
               f'model_checkpoint_path: {name}\nall_model_checkpoint_paths: {name}\n')
