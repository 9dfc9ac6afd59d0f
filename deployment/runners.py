"""Runners: where a training step runs, the one branch point between distribution modes.

The same step function (a tf.function of a distributed iterator and a step count that
calls `strategy.run`) is either run in this process (`LocalRunner`: one device,
MirroredStrategy, MultiWorkerMirroredStrategy) or scheduled on remote workers by a
`ClusterCoordinator` (`CoordinatorRunner`: ParameterServerStrategy), each worker reading
its own iterator. `run` returns handles; `fetch` turns them into numpy values, so a
loop reads results only when it logs them.
"""
from typing import Callable

import numpy as np
import tensorflow as tf

from deployment.aggregation import is_parameter_server


def _to_numpy(structure):
    return tf.nest.map_structure(np.asarray, structure)


class LocalRunner:
    """Runs `num_steps` steps as one call of the step function, in this process."""

    def __init__(self, strategy: tf.distribute.Strategy, input_fn: Callable):
        self._iterator = iter(strategy.distribute_datasets_from_function(input_fn))

    def run(self, steps_fn: Callable, num_steps: int):
        return steps_fn(self._iterator, tf.constant(num_steps))

    def fetch(self, outputs):
        return _to_numpy(outputs)


class CoordinatorRunner:
    """Schedules one step at a time on whichever parameter-server worker is free."""

    def __init__(self, strategy: tf.distribute.Strategy, input_fn: Callable):
        self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(
            strategy)

        @tf.function
        def per_worker_dataset():
            return strategy.distribute_datasets_from_function(input_fn)

        self._iterator = iter(self.coordinator.create_per_worker_dataset(per_worker_dataset))

    def run(self, steps_fn: Callable, num_steps: int):
        one = tf.constant(1)
        for _ in range(num_steps):
            result = self.coordinator.schedule(steps_fn, args=(self._iterator, one))
        return result

    def fetch(self, outputs):
        self.coordinator.join()
        return _to_numpy(outputs.fetch())


def create_runner(strategy: tf.distribute.Strategy, input_fn: Callable):
    """The runner for a strategy; `input_fn(input_context)` returns a tf.data.Dataset."""
    if is_parameter_server(strategy):
        return CoordinatorRunner(strategy, input_fn)
    return LocalRunner(strategy, input_fn)
