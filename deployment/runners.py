"""Runners: where the inner loop's compiled call runs (the deployment plan picks one).

The same step function (a tf.function of a distributed iterator and a step count that
calls `strategy.run`) is either run in this process (`LocalRunner`: one device,
clones on one host, MultiWorkerMirroredStrategy) or scheduled on remote workers by a
`ClusterCoordinator` (`CoordinatorRunner`: ParameterServerStrategy), each worker reading
its own iterator. `run` returns handles; `fetch` turns them into numpy values, so a
loop reads results only when it logs them.
"""
import contextlib
import re
from typing import Callable, List, Optional

import numpy as np
import tensorflow as tf

from core.errors import ClusterTaskFailed


def to_numpy(structure):
    return tf.nest.map_structure(np.asarray, structure)


class HostIterator:
    """The input of this host's replicas read through one tf.data iterator, each step
    handing one element to each local replica in turn (the order a distributed iterator
    gives): clones on one host, or one worker of a multi-worker all-reduce (its own
    input pipeline, as distribute_datasets_from_function would make it).

    Unlike a distributed iterator, its position can be checkpointed, so training resumes
    exactly. Each replica's batch is copied to its device inside the step (not
    prefetched to the device ahead of it).
    """

    def __init__(self, strategy: tf.distribute.Strategy, input_fn: Callable,
                 input_context: tf.distribute.InputContext):
        self._strategy = strategy
        self.input_context = input_context
        self._local_replicas = len(strategy.extended.worker_devices)
        # The global number of this host's first replica.
        self._first_replica = input_context.input_pipeline_id * self._local_replicas
        self.host_iterator = iter(input_fn(input_context))

    def __next__(self):
        elements = [next(self.host_iterator) for _ in range(self._local_replicas)]
        return self._strategy.experimental_distribute_values_from_function(
            lambda context: elements[context.replica_id_in_sync_group
                                     - self._first_replica])


def one_host_input_context(strategy: tf.distribute.Strategy) -> tf.distribute.InputContext:
    return tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                      num_replicas_in_sync=strategy.num_replicas_in_sync)


def worker_input_context(strategy: tf.distribute.Strategy) -> tf.distribute.InputContext:
    """This worker's input pipeline in a multi-worker all-reduce: the one
    MultiWorkerMirroredStrategy's distribute_datasets_from_function gives it (workers
    numbered with a chief job's task first)."""
    resolver = strategy.cluster_resolver
    spec = resolver.cluster_spec().as_dict()
    has_chief = 'chief' in spec
    pipelines = len(spec.get('chief', [])) + len(spec.get('worker', []))
    worker = 0 if resolver.task_type == 'chief' else resolver.task_id + int(has_chief)
    return tf.distribute.InputContext(num_input_pipelines=pipelines,
                                      input_pipeline_id=worker,
                                      num_replicas_in_sync=strategy.num_replicas_in_sync)


def _is_one_host_clones(strategy: tf.distribute.Strategy) -> bool:
    return (isinstance(strategy, tf.distribute.MirroredStrategy)
            and strategy.num_replicas_in_sync > 1)


class LocalRunner:
    """Runs `num_steps` steps as one call of the step function, in this process. Given
    the cluster (multi-worker all-reduce), a worker that stops answering ends training
    in one line naming it. input_options (deployment.device_input) go to the strategy's
    distribute_datasets_from_function; clones on one host read without it, and so does
    a worker of a multi-worker all-reduce whose input position is checkpointed
    (`checkpointable_input`): each reads through a HostIterator."""

    def __init__(self, strategy: tf.distribute.Strategy, input_fn: Callable,
                 cluster: Optional[dict] = None,
                 input_options: Optional[tf.distribute.InputOptions] = None,
                 checkpointable_input: bool = False):
        if _is_one_host_clones(strategy):
            self._iterator = HostIterator(strategy, input_fn,
                                          one_host_input_context(strategy))
        elif cluster and checkpointable_input:
            self._iterator = HostIterator(strategy, input_fn, worker_input_context(strategy))
        else:
            self._iterator = iter(strategy.distribute_datasets_from_function(
                input_fn, options=input_options))
        self._cluster = cluster
        self.after_call: List[Callable[[], None]] = []  # run once each call's results are in
        self._failures_named = (
            (lambda: task_failures_named(cluster, RESTART_ALL_WORKERS)) if cluster
            else contextlib.nullcontext)

    def run(self, steps_fn: Callable, num_steps: int):
        with self._failures_named():
            return steps_fn(self._iterator, tf.constant(num_steps))

    def failures_named(self):
        """A context in which a cluster task that stops answering ends in one line."""
        return self._failures_named()

    def checkpointable_iterator(self):
        """The input iterator if the model checkpoint can hold its position (one device,
        or clones on one host), else None (several workers: worker_iterator)."""
        if self._cluster:
            return None
        if isinstance(self._iterator, HostIterator):
            return self._iterator.host_iterator
        if isinstance(self._iterator, tf.distribute.DistributedIterator):
            return None
        return self._iterator if isinstance(self._iterator, tf.data.Iterator) else None

    def worker_iterator(self):
        """(this worker's tf.data iterator, its InputContext) where each worker of a
        cluster saves its own position (deployment.input_positions), else None."""
        if self._cluster and isinstance(self._iterator, HostIterator):
            return self._iterator.host_iterator, self._iterator.input_context
        return None

    def fetch(self, outputs):
        with self._failures_named():
            values = to_numpy(outputs)
        for hook in self.after_call:
            hook()
        return values


_TASK_NAME = re.compile(r'/job:(\w+)/replica:\d+/task:(\d+)')
_TASK_ADDRESS = re.compile(r'ipv4:([\w.-]+:\d+)')


# The coordination service's verdict: 'The following tasks are unhealthy (stopped
# sending heartbeats):\n/job:worker/replica:0/task:1'.
_UNHEALTHY_TASK = re.compile(r'unhealthy[^\n]*\n\s*/job:(\w+)/replica:\d+/task:(\d+)')


def _task(job: str, index: int, cluster: dict) -> str:
    hosts = cluster.get(job, [])
    return f'{job} task {index}' + (f' ({hosts[index]})' if index < len(hosts) else '')


def describe_failed_task(error: Exception, cluster: dict) -> str:
    """'ps task 1 (127.0.0.1:4242)' from a gRPC error's text, as far as it tells."""
    text = str(error)
    unhealthy = _UNHEALTHY_TASK.search(text)
    if unhealthy:
        return _task(unhealthy.group(1), int(unhealthy.group(2)), cluster)
    addressed = _TASK_ADDRESS.search(text)  # the peer that did not answer
    if addressed:
        for job, hosts in cluster.items():
            if addressed.group(1) in hosts:
                return f'{job} task {hosts.index(addressed.group(1))} ({addressed.group(1)})'
    named = _TASK_NAME.search(text)
    if named:
        return _task(named.group(1), int(named.group(2)), cluster)
    return 'a task of the cluster'


@contextlib.contextmanager
def task_failures_named(cluster: dict, then: str):
    """A task of the cluster that stops answering (gRPC's Unavailable or Aborted) ends
    training in one line naming it, then `then` (what to do)."""
    try:
        yield
    except (tf.errors.UnavailableError, tf.errors.AbortedError) as error:
        raise ClusterTaskFailed(f'{describe_failed_task(error, cluster)} stopped answering, '
                                f'so training stopped; {then}') from None


# What to do when a worker of a multi-worker all-reduce stops answering.
RESTART_ALL_WORKERS = ('restart every worker with the same flags: training resumes from '
                       'the last checkpoint in --train_dir.')


class CoordinatorRunner:
    """Schedules steps on the parameter-server workers, asynchronously: one step per
    closure, on whichever worker is free. (Sync replicas schedule rounds instead:
    deployment.sync_replicas_runner.)"""

    def __init__(self, strategy: tf.distribute.Strategy, input_fn: Callable,
                 input_options: Optional[tf.distribute.InputOptions] = None):
        self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(
            strategy)
        # The strategy keeps its resolver privately (strategy.cluster_resolver is None).
        self._cluster = strategy._cluster_resolver.cluster_spec().as_dict()  # pylint: disable=protected-access
        # No public API names the worker count (strategy.cluster_resolver is None here).
        self.num_workers = strategy.extended._num_workers  # pylint: disable=protected-access

        @tf.function
        def per_worker_dataset():
            return strategy.distribute_datasets_from_function(input_fn,
                                                              options=input_options)

        self._iterator = iter(self.coordinator.create_per_worker_dataset(per_worker_dataset))

    def checkpointable_iterator(self):
        return None  # per-worker iterators live on the workers

    @contextlib.contextmanager
    def _task_failures_named(self):
        """The coordinator rides out dead workers; a parameter server that stops answering
        ends training with one line naming it."""
        with task_failures_named(self._cluster, 'restart that task, then this one: '
                                 'training resumes from the last checkpoint in '
                                 '--train_dir.'):
            yield

    def failures_named(self):
        """A context in which a task that stops answering ends in one line (the chief
        reads and saves the ps tasks' variables between calls too)."""
        return self._task_failures_named()

    def run(self, steps_fn: Callable, num_steps: int):
        with self._task_failures_named():
            return self._schedule(steps_fn, num_steps)

    def _schedule(self, steps_fn: Callable, num_steps: int):
        one = tf.constant(1)
        for _ in range(num_steps):
            result = self.coordinator.schedule(steps_fn, args=(self._iterator, one))
        return result

    def fetch(self, outputs):
        with self._task_failures_named():
            return self._fetch(outputs)

    def _fetch(self, outputs):
        self.coordinator.join()
        return to_numpy(outputs.fetch())
