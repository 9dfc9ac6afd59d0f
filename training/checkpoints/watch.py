"""Continuous evaluation (slim's evaluation_loop, beyond it): `watch_checkpoints` yields
each new checkpoint of a train_dir exactly once, in step order, until the training's
final checkpoint or a timeout. The final checkpoint is the one whose step reaches the
run's --max_number_of_steps, which the caller reads from the train_dir's run record.
"""
import dataclasses
import re
import time
from typing import Callable, Iterator, List, Optional, Tuple

import tensorflow as tf
from absl import logging

from core.errors import UsageError
from training.checkpoints import integrity

_CHECKPOINT_STEP = re.compile(r'-(\d+)$')


def check_train_dir(train_dir: str):
    """Continuous evaluation follows a directory (which may not exist yet: the training
    creates it); refuses a file or a checkpoint prefix in one line."""
    is_file = tf.io.gfile.exists(train_dir) and not tf.io.gfile.isdir(train_dir)
    if is_file or checkpoint_exists(train_dir):
        raise UsageError(f'--eval_interval_secs watches a training directory for new '
                         f'checkpoints, and {train_dir} is not one: pass '
                         '--checkpoint_path=<train_dir>, or drop --eval_interval_secs to '
                         'evaluate one checkpoint.')


def checkpoint_exists(prefix: str) -> bool:
    return tf.io.gfile.exists(prefix + '.index')


def list_checkpoints(train_dir: str) -> List[Tuple[int, str]]:
    """(step, prefix) of the checkpoints the train_dir's 'checkpoint' file lists and
    that exist, by step."""
    state = tf.train.get_checkpoint_state(train_dir)
    found = []
    for path in (state.all_model_checkpoint_paths if state else []):
        match = _CHECKPOINT_STEP.search(path)
        if match and checkpoint_exists(path):
            found.append((int(match.group(1)), path))
    return sorted(found)


@dataclasses.dataclass(frozen=True)
class WatchConfig:
    """How continuous evaluation follows a train_dir."""
    interval_secs: float = 60.0  # between looks for a new checkpoint
    timeout_secs: Optional[float] = None  # stop this long after the last new checkpoint
    backfill: bool = False  # also the checkpoints already there at start, oldest first

    def __post_init__(self):
        if self.interval_secs < 0:
            raise UsageError(f'--eval_interval_secs={self.interval_secs:g}; pass zero or '
                             'more seconds.')
        if self.timeout_secs is not None and self.timeout_secs <= 0:
            raise UsageError(f'--eval_timeout_secs={self.timeout_secs:g}; pass a positive '
                             'number of seconds, or leave it unset to wait for the final '
                             'checkpoint.')


def _files_signature(prefix: str) -> tuple:
    """Changes when the checkpoint's files are written again."""
    stats = []
    for path in [prefix + '.index', *integrity.data_files(prefix)]:
        try:
            stat = tf.io.gfile.stat(path)
        except tf.errors.NotFoundError:
            continue
        stats.append((path, stat.length, stat.mtime_nsec))
    return tuple(stats)


def _newest_intact_at_start(train_dir: str, damaged: dict) -> List[Tuple[int, str]]:
    """[(step, prefix)] of the newest intact checkpoint (or []), with one warning if
    newer ones are damaged; those go into damaged (prefix: their files' signature)."""
    search = integrity.newest_intact(train_dir)
    if search.damaged:
        logging.warning('%s', search.fallback_message('evaluating') if search.intact else
                        f'{search.describe_damage()}; waiting for a new checkpoint.')
    damaged.update((prefix, _files_signature(prefix)) for prefix, _ in search.damaged)
    if search.intact is None:
        return []
    return [(integrity.step_of(search.intact), search.intact)]


def watch_checkpoints(train_dir: str, config: WatchConfig, *,
                      final_step: Callable[[], Optional[int]] = lambda: None,
                      skip: Callable[[str], bool] = lambda path: False,
                      clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], None] = time.sleep) -> Iterator[Tuple[int, str]]:
    """Yields (step, prefix) of each new checkpoint in train_dir once, in step order.

    Starts from the newest intact checkpoint present (all of them with
    config.backfill); checkpoints for which skip(prefix) holds (evaluated before) are
    passed over. Ends after a checkpoint at or beyond final_step() (read afresh each
    time: the run's --max_number_of_steps, None if unknown), or when none came for
    config.timeout_secs. A checkpoint the training deleted (--max_checkpoints_to_keep)
    before its turn is passed over with a warning; a damaged one too, until its files
    are written again (a resumed training saving that step anew).
    """
    logging.info('Watching %s for new checkpoints every %g s.', train_dir,
                 config.interval_secs)
    last_step = None
    damaged = {}  # prefix: signature of its files when found damaged (warned once)
    verified = set()
    first_look = True
    last_news = clock()
    while True:
        found = [(step, path) for step, path in list_checkpoints(train_dir)
                 if last_step is None or step > last_step]
        if first_look and not config.backfill:
            found = _newest_intact_at_start(train_dir, damaged)
            verified = {path for _, path in found}
        first_look = False
        for step, path in found:
            if path in damaged and damaged[path] == _files_signature(path):
                continue  # the damaged files still; a save of that step replaces them
            evaluated_before = skip(path)
            problem = (None if evaluated_before or path in verified
                       else integrity.find_damage(path))
            if evaluated_before:
                logging.info('%s was evaluated before; skipping it.', path)
            elif not checkpoint_exists(path):  # maybe while it was read
                logging.warning('%s was deleted before its evaluation (raise the '
                                'training\'s --max_checkpoints_to_keep to keep it).', path)
            elif problem is not None:
                damaged[path] = _files_signature(path)
                logging.warning('Checkpoint %s is damaged (%s); skipping it (its files '
                                'are left in place).', path, problem)
                continue
            else:
                yield step, path
            last_step = step
            last_news = clock()
            final = final_step()
            if final is not None and step >= final:
                logging.info('Checkpoint %s is the training\'s last (step %d of %d); '
                             'evaluation ends.', path, step, final)
                return
        if config.timeout_secs is not None and clock() - last_news >= config.timeout_secs:
            logging.info('No new checkpoint in %s for %g s (--eval_timeout_secs); '
                         'evaluation ends.', train_dir, config.timeout_secs)
            return
        sleep(config.interval_secs)
