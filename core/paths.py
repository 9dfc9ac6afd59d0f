"""Checks on the directories a job reads and writes, made before any TensorFlow work so a
wrong path ends in one line instead of a traceback from a file writer; and setting a
file aside instead of replacing it."""
import os

from core.errors import UsageError


def is_remote(path: str) -> bool:
    return '://' in path  # gs://, hdfs://: checked by the file system when used


def check_output_dir(path: str, flag: str) -> None:
    """Raises a UsageError unless `path` is, or can be created as, a writable directory."""
    if not path:
        raise UsageError(f'{flag} is empty; pass a directory.')
    if is_remote(path):
        return
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f'{flag}={path} is a file, not a directory; pass a directory '
                         f'(it is created if missing).')
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UsageError(f'{flag}={path} cannot be created: {existing} is a file; pass a '
                         f'directory elsewhere.')
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f'{flag}={path} is not writable ({existing} does not allow it); '
                         f'pass a directory you can write to.')


def check_input_dir(path: str, flag: str, fix: str) -> None:
    """Raises a UsageError unless `path` is an existing directory; fix says how to make one."""
    if is_remote(path):
        return
    if not os.path.exists(path):
        raise UsageError(f'{flag}={path} does not exist; {fix}.')
    if not os.path.isdir(path):
        raise UsageError(f'{flag}={path} is a file, not a directory; {fix}.')


def set_aside(path: str, suffix: str) -> str:
    """Renames the file at path to path + suffix (or path + suffix + '-2', '-3', ...: never
    over another file) and returns the new name. For files a job must not replace
    because it may not have written them."""
    candidate, number = path + suffix, 1
    while os.path.lexists(candidate):
        number += 1
        candidate = f'{path}{suffix}-{number}'
    os.rename(path, candidate)
    return candidate


def remove_all(paths) -> None:
    """Removes each file or directory tree in `paths` (local or remote); one that cannot
    be removed is a warning, not an error: leftovers of a failed or pruned save."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from absl import logging  # pylint: disable=import-outside-toplevel
    for path in paths:
        try:
            if tf.io.gfile.isdir(path):
                tf.io.gfile.rmtree(path)
            else:
                tf.io.gfile.remove(path)
        except (tf.errors.OpError, OSError) as error:
            logging.warning('Could not remove %s: %s', path, error)
