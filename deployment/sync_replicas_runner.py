"""The chief's runner of sync replicas: a round per `run`, one closure per worker in
flight, each stepping until the round's target update; `fetch` returns once that update
is applied, not waiting for backups' steps. The general parameter-server runner
(deployment.runners.CoordinatorRunner) schedules, watches failures and makes the
per-worker input; this one changes what a call schedules and waits for."""
import queue
import threading
from typing import Callable, Optional

import tensorflow as tf

from deployment.runners import CoordinatorRunner, to_numpy


class SyncReplicasRunner(CoordinatorRunner):
    """Rounds of sync replicas on the parameter-server workers; `global_step` is the
    one the rounds' targets count."""

    def __init__(self, strategy: tf.distribute.Strategy, input_fn: Callable,
                 global_step: tf.Variable,
                 input_options: Optional[tf.distribute.InputOptions] = None):
        super().__init__(strategy, input_fn, input_options=input_options)
        self._rounds = SyncRounds(self.coordinator, self._iterator, self.num_workers,
                                  global_step)

    def _schedule(self, steps_fn: Callable, num_steps: int):
        return self._rounds.start(steps_fn, num_steps)

    def _fetch(self, outputs):
        return to_numpy(self._rounds.finish())


class _Closure:
    """One scheduled call of the steps function, and what it returned."""

    def __init__(self, target: int, remote_value):
        self.target = target
        self.remote_value = remote_value
        self.outputs = None
        self.error = None
        self.lost = False  # ended, but its outputs died with its worker


class SyncRounds:
    """The chief's side of the rounds: at most one closure per worker in flight (a slow
    backup never piles them up), and a round ends when its first closure does."""

    def __init__(self, coordinator, iterator, num_workers: int, global_step: tf.Variable):
        self._coordinator = coordinator
        self._iterator = iterator
        self._num_workers = num_workers
        self._global_step = global_step
        self._in_flight = set()
        self._ended = queue.Queue()  # closures whose outputs (or error) have arrived
        self._steps_fn = None
        self._target = None

    def start(self, steps_fn: Callable, num_steps: int):
        """Starts the round of the next `num_steps` updates."""
        self._steps_fn = steps_fn
        self._target = int(self._global_step.numpy()) + num_steps
        while True:  # closures that ended since the last round free their worker
            try:
                self._settle(self._ended.get_nowait())
            except queue.Empty:
                break
        while len(self._in_flight) < self._num_workers:
            self._schedule()

    def finish(self):
        """The outputs of this round's first closure to end: by then the round's last
        update is applied. An earlier round's closure that ends is replaced."""
        while True:
            closure = self._ended.get()
            outputs = self._settle(closure)
            if closure.target == self._target and not closure.lost:
                return outputs
            # A lost closure of this round is replaced too: the new one finds the
            # round's target reached, steps once ('done') and returns its outputs.
            self._schedule()

    def _schedule(self):
        closure = _Closure(self._target, self._coordinator.schedule(
            self._steps_fn, args=(self._iterator, tf.constant(self._target, tf.int64))))
        self._in_flight.add(closure)
        threading.Thread(target=self._watch, args=(closure,), daemon=True,
                         name='sync_replicas_closure').start()

    def _watch(self, closure: _Closure):
        try:
            closure.outputs = closure.remote_value.fetch()
        except (tf.errors.UnavailableError, tf.errors.AbortedError) as error:
            if _lost_with_its_worker(error):
                closure.lost = True
            else:
                closure.error = error
        except Exception as error:  # pylint: disable=broad-except
            closure.error = error  # raised in the chief's thread (_settle)
        self._ended.put(closure)

    def _settle(self, closure: _Closure):
        self._in_flight.discard(closure)
        if closure.error is not None:
            raise closure.error
        return closure.outputs


def _lost_with_its_worker(error: tf.errors.OpError) -> bool:
    """Whether fetching a closure's outputs failed because its worker died after the
    closure ended: they live on that worker until fetched. (The coordinator re-runs a
    closure whose worker dies while it runs, and a dead ps is named as /job:ps.)"""
    text = str(error)
    return '/job:worker/' in text and '/job:ps/' not in text
