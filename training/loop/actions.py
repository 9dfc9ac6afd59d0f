"""The outer loop's periodic work, one small action each (training.loop.controller calls
them after every call of the inner loop, in order, as `action(previous, step, result)`;
an action with `finish(step, result)` also runs once when training stops, one with
`before_call(step, num_steps)` before each call). The summaries are
training.summaries.train_summaries'."""
import math
import os
import time
from typing import Optional, Sequence

import tensorflow as tf
from absl import logging

from core.errors import SaveFailed, TrainingDiverged, tensorflow_reason
from deployment import tracing as tracing_lib
from training.checkpoints import integrity
from training.checkpoints import resume


class WarnSkippedExamples:
    """At most one warning per call when unreadable examples were skipped."""

    def __init__(self):
        self.logged = 0

    def __call__(self, previous, step, result):
        skipped = int(result.metrics.get('input/skipped_examples', 0))
        if skipped > self.logged:
            logging.warning('Skipped %d unreadable example(s) so far.', skipped)
            self.logged = skipped


def diverged(loss: float, upper_bound: float = math.inf) -> bool:
    """A non-finite loss, or one above --loss_upper_bound."""
    return not math.isfinite(loss) or loss > upper_bound


def describe_divergence(loss: float, upper_bound: float = math.inf) -> str:
    """'Loss became nan', or 'Loss became 2e+06 (above --loss_upper_bound=1e+06)'."""
    if math.isfinite(loss):
        return f'Loss became {loss:g} (above --loss_upper_bound={upper_bound:g})'
    return f'Loss became {loss}'


def divergence_error(what: str, step: int, last_good: Optional[str],
                     after: str = '') -> TrainingDiverged:
    """The one line a diverged run stops with: what diverged (describe_divergence), the
    step, the checkpoint to go back to; `after` says what was tried before."""
    restart = (f'the last good checkpoint is {last_good}' if last_good else
               'no checkpoint was saved before it')
    return TrainingDiverged(
        f'{what} by step {step}{after}; {restart}; lower --learning_rate (or check the '
        'input data) and train again.')


class CheckDivergence:
    """Stops without saving the diverged weights, naming the checkpoint to go back to
    (--divergence_retries=0; training.loop.rollback rolls back otherwise)."""

    def __init__(self, manager: tf.train.CheckpointManager, upper_bound: float = math.inf):
        self.manager = manager
        self.upper_bound = upper_bound

    def __call__(self, previous, step, result):
        loss = result.metrics['total_loss']
        if diverged(loss, self.upper_bound):
            raise divergence_error(describe_divergence(loss, self.upper_bound), step,
                                   self.manager.latest_checkpoint)


class LogLine:
    """Every --log_every_n_steps and at the last step: loss, speed, learning rate, ETA."""

    def __init__(self, pace, examples_per_step: int):
        self.pace = pace
        self.examples_per_step = examples_per_step

    def __call__(self, previous, step, result):
        every, max_steps = self.pace.log_every_n_steps, self.pace.max_steps
        if step // every <= previous // every and step != max_steps:
            return
        sec_per_step = self.pace.window_sec_per_step()
        self.pace.reset_window()
        remaining = ''
        if max_steps is not None and sec_per_step is not None:
            eta = int((max_steps - step) * sec_per_step)
            remaining = f', ETA {eta // 3600}:{eta // 60 % 60:02d}:{eta % 60:02d}'
        timing = ('includes tracing' if sec_per_step is None else
                  f'{sec_per_step:.3f} sec/step, '
                  f'{self.examples_per_step / sec_per_step:.1f} examples/sec')
        metrics = result.metrics
        logging.info('global step %d: loss = %.4f (%s), lr = %.6g%s', step,
                     metrics['total_loss'], timing, metrics['learning_rate'], remaining)


class CheckpointSaver:
    """Saves at a step, once; a failed save (disk full, I/O) is one line and leaves the
    previous checkpoint the latest."""

    def __init__(self, manager: tf.train.CheckpointManager, train_dir: str):
        self.manager = manager
        self.train_dir = train_dir

    def save(self, step: int):
        latest = self.manager.latest_checkpoint
        if latest and latest.endswith(f'-{step}'):  # saved at this step already
            return
        prefix = tf.io.gfile.join(self.train_dir, f'model.ckpt-{step}')
        moved = integrity.set_aside(prefix, self.manager.checkpoints)
        if moved:
            logging.info('Moved the files of %s, a damaged checkpoint, into %s so that '
                         'this save does not overwrite them.', prefix,
                         os.path.dirname(moved[0]))
        try:
            path = self.manager.save(checkpoint_number=step)
        except (tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError,
                tf.errors.UnavailableError, tf.errors.DataLossError, OSError) as error:
            # What this save left behind goes; the checkpoint file still names the last
            # complete one.
            resume.remove_partial_save(self.train_dir, step)
            kept = self.manager.latest_checkpoint
            raise SaveFailed(
                f'Saving the checkpoint of step {step} ({prefix}) failed: '
                f'{save_failure_reason(error)}; '
                + (f'{kept} stays the latest' if kept else 'no checkpoint was saved before')
                + f'; free space in --train_dir={self.train_dir} if the disk is full (or '
                'pass another --train_dir) and run again to resume.') from None
        logging.info('Saved checkpoint %s.', path)


def save_failure_reason(error: Exception) -> str:
    """What the system said, without TensorFlow's op name and temporary file: from
    '{{function_node __wrapped__SaveV2...}} /t/model.ckpt-4_temp/part-00000...; No space
    left on device [Op:SaveV2]', 'No space left on device'."""
    reason = tensorflow_reason(error)
    path, _, said = reason.rpartition('; ')
    return said if path and ' ' not in path else reason


class SaveCheckpoints:
    """A checkpoint every --save_interval_secs (a monotonic clock: a wall clock set back
    would hold saves off), and when training stops."""

    def __init__(self, saver: CheckpointSaver, every_secs: float):
        self.saver = saver
        self.every_secs = every_secs
        self.last = time.monotonic()

    def __call__(self, previous, step, result):
        if time.monotonic() - self.last >= self.every_secs:
            self.saver.save(step)
            self.last = time.monotonic()

    def finish(self, step, result):
        self.saver.save(step)


class TraceSteps:
    """A profiler trace of one step every --trace_every_n_steps (the chief's; in a
    cluster it covers every task). The traced step is a call of its own."""

    def __init__(self, every: int, step: int, train_dir: str, addresses: Sequence[str]):
        self.every = every
        self.train_dir = train_dir
        self.addresses = tuple(addresses)
        self.period = step // every  # the period traced last
        self.traced_steps = []

    def due(self, step: int) -> bool:
        if step // self.every <= self.period:
            return False
        self.period = step // self.every
        self.traced_steps.append(step)
        return True

    def limit(self, step: int, num_steps: int) -> int:
        """Calls end where a traced step starts."""
        return min(num_steps, self.every - step % self.every)

    def around(self, sec_per_step: Optional[float]):
        return tracing_lib.trace(self.train_dir, self.addresses, sec_per_step)
