"""Each worker's input position under multi-worker all-reduce, saved beside the chief's
checkpoints so that a restarted cluster reads on exactly where the checkpoint was written.

Every worker reads its own shard through its own tf.data iterator, and only the chief
writes the model checkpoint. So each worker writes its iterator's state itself, to

    <train_dir>/input_positions/worker-<i>-of-<n>/position-<step>.{index,data-*}

keyed by the step of the chief's checkpoint it belongs to (i: the worker's number in the
cluster, the chief 0; n: the number of workers, so a cluster of another size never reads
a position sharded otherwise). When: the chief's newest checkpoint step travels with the
workers' agreement before each call (deployment.agreement); a worker whose step is that
step writes its position then, before the next call moves its iterator. A stop agreed
by all is written at the stop's step, and the last step (--max_number_of_steps) once its
call is done: the chief's final save is of that step.

On restore a worker reads the position of exactly the restored step. None there (a
checkpoint from before positions were saved, or a worker killed before writing it) or
one that does not read back: a fresh shuffle, said in one line. Never another step's.
Positions older than the oldest checkpoint the chief keeps are removed.
"""
import re
from typing import Callable, Iterable, List, Optional

import tensorflow as tf
from absl import logging

from core import paths
from core.errors import tensorflow_reason
from deployment.agreement import CallPlan

POSITIONS_DIR = 'input_positions'
_POSITION = re.compile(r'^position-(\d+)\.index$')
_CHECKPOINT_STEP = re.compile(r'-(\d+)$')


def worker_directory(train_dir: str, worker: int, num_workers: int) -> str:
    return tf.io.gfile.join(train_dir, POSITIONS_DIR, f'worker-{worker}-of-{num_workers}')


def position_prefix(directory: str, step: int) -> str:
    return tf.io.gfile.join(directory, f'position-{step}')


def checkpoint_step(path: Optional[str]) -> Optional[int]:
    """The step of a checkpoint prefix ('.../model.ckpt-120' -> 120), None for none."""
    match = _CHECKPOINT_STEP.search(path or '')
    return int(match.group(1)) if match else None


def saved_steps(names: Iterable[str]) -> List[int]:
    """The steps whose position is complete (its .index is written last), from the file
    names of a worker's directory, ascending."""
    return sorted(int(m.group(1)) for m in map(_POSITION.match, names) if m)


def steps_to_remove(saved: Iterable[int], kept_checkpoint_steps: Iterable[int],
                    keep: int) -> List[int]:
    """Positions no kept checkpoint can pair with: older than the oldest checkpoint the
    chief keeps. `keep` (the position just written) always stays."""
    kept = list(kept_checkpoint_steps)
    if not kept:
        return []
    oldest = min(kept)
    return [step for step in saved if step < oldest and step != keep]


def should_write(call: CallPlan, step: int, written: Optional[int]) -> bool:
    """Whether a worker at `step` writes its position after agreeing on `call`: at the
    step of the chief's newest checkpoint, or where all stop (the final save's step);
    once per step."""
    if step == written:
        return False
    return call.stop or call.saved_step == step


class WorkerInputPositions:
    """One worker's input position: restored for the step the model was restored at,
    written at the steps the chief's checkpoints are of."""

    def __init__(self, *, train_dir: str, worker: int, num_workers: int,
                 iterator: tf.data.Iterator, current_step: Callable[[], int],
                 final_step: Optional[int] = None):
        self.train_dir = train_dir
        self.final_step = final_step  # --max_number_of_steps, where the chief saves last
        self.worker = worker
        self.directory = worker_directory(train_dir, worker, num_workers)
        self._checkpoint = tf.train.Checkpoint(input_position=iterator)
        self._current_step = current_step
        self.written = None  # the step whose position this worker wrote last

    def _saved_steps(self) -> List[int]:
        if not tf.io.gfile.isdir(self.directory):
            return []
        return saved_steps(tf.io.gfile.listdir(self.directory))

    def restore(self) -> bool:
        """Reads the position of the step the model was restored at (none at step 0: a
        fresh start). Whether a position was restored."""
        step = self._current_step()
        self.written = step  # that step's position exists, or this run starts afresh
        if step == 0:
            return False
        fresh = 'reading a fresh shuffle of the data'
        if step not in self._saved_steps():
            logging.info('Worker %d has no input position for step %d in %s (a checkpoint '
                         'from before positions were saved per worker, or the worker '
                         'stopped before writing it): %s.', self.worker, step,
                         self.directory, fresh)
            return False
        try:
            self._checkpoint.read(position_prefix(self.directory, step)).assert_consumed()
        except (tf.errors.OpError, AssertionError, ValueError) as error:
            logging.warning('Worker %d\'s input position for step %d does not fit this '
                            'input (%s): %s.', self.worker, step,
                            tensorflow_reason(error)[:200], fresh)
            return False
        logging.info('Worker %d reads on from its input position of step %d.',
                     self.worker, step)
        return True

    def after_agreement(self, call: CallPlan):
        """Writes this worker's position if the agreed call says a checkpoint is (or
        is about to be) of the step reached."""
        step = self._current_step()
        if should_write(call, step, self.written):
            self.write(step)

    def after_call(self):
        """Writes this worker's position at the last step, which the chief saves after
        the last call with no agreement in between. Again if a rolled-back call reaches
        it again."""
        step = self._current_step()
        if step == self.final_step:
            self.write(step)

    def write(self, step: int):
        """Writes the position of `step`; a failed write (disk full, I/O) is one
        warning, and a resume from that step reads a fresh shuffle on this worker."""
        prefix = position_prefix(self.directory, step)
        # A rewrite of the step (a resumed run passing it again) removes the old files
        # first: a write cut short then leaves no .index, never a mix of two.
        self._remove(step)
        try:
            tf.io.gfile.makedirs(self.directory)
            self._checkpoint.write(prefix)
        except (tf.errors.OpError, OSError) as error:
            self._remove(step)
            logging.warning('Could not write worker %d\'s input position of step %d to %s '
                            '(%s); training goes on, and a resume from that step reads '
                            'a fresh shuffle on this worker.', self.worker, step,
                            self.directory, tensorflow_reason(error)[:200])
            return
        self.written = step
        self._prune(step)

    def _prune(self, keep: int):
        state = tf.train.get_checkpoint_state(self.train_dir)
        kept = [checkpoint_step(path) for path in
                (state.all_model_checkpoint_paths if state else [])]
        for step in steps_to_remove(self._saved_steps(), [s for s in kept if s is not None],
                                    keep):
            self._remove(step)

    def _remove(self, step: int):
        """The files of a step's position, and the temporary folder of a write cut
        short."""
        prefix = position_prefix(self.directory, step)
        paths.remove_all(tf.io.gfile.glob(prefix + '.*') + tf.io.gfile.glob(prefix + '_temp*'))
