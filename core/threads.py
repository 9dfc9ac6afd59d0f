"""TensorFlow's thread settings for the host: its inter-op and intra-op pools, and the
GPU thread mode of the TF Model Garden's GPU hosts.

TensorFlow reads all of them when it initialises its devices, at its first op, not at
its import: `apply` runs after the flags parse and before the strategy is made. The GPU
thread mode is read by each GPU device as it is created (TF_GPU_THREAD_MODE and
TF_GPU_THREAD_COUNT); on a machine without GPUs nothing reads it.
"""
import dataclasses
import os
from typing import Optional

import tensorflow as tf
from absl import logging

from core.errors import UsageError

GPU_THREAD_MODES = ('global', 'gpu_private', 'gpu_shared')
MODE_ENV, COUNT_ENV = 'TF_GPU_THREAD_MODE', 'TF_GPU_THREAD_COUNT'


@dataclasses.dataclass(frozen=True)
class ThreadConfig:
    """0 threads, or a mode left None: TensorFlow's choice (its default, or the
    environment variable already set)."""
    inter_op_threads: int = 0
    intra_op_threads: int = 0
    gpu_thread_mode: Optional[str] = None
    gpu_thread_count: Optional[int] = None
    tasks_sharing_host: int = 1  # of one training cluster, this one included (shared_by)

    def __post_init__(self):
        for name in ('inter_op_threads', 'intra_op_threads'):
            if getattr(self, name) < 0:
                raise UsageError(f'--{name} must be at least 0 (0: TensorFlow\'s choice), '
                                 f'got {getattr(self, name)}.')
        if self.gpu_thread_mode is not None and self.gpu_thread_mode not in GPU_THREAD_MODES:
            raise UsageError(f'Unknown --gpu_thread_mode={self.gpu_thread_mode}; use one '
                             f'of {", ".join(GPU_THREAD_MODES)}.')
        if self.gpu_thread_count is not None:
            if self.gpu_thread_mode not in ('gpu_private', 'gpu_shared'):
                raise UsageError('--gpu_thread_count sizes a GPU thread pool of its own: '
                                 'add --gpu_thread_mode=gpu_private or gpu_shared, or drop '
                                 'it.')
            if self.gpu_thread_count < 1:
                raise UsageError(f'--gpu_thread_count must be at least 1, got '
                                 f'{self.gpu_thread_count}.')


def shared_by(config: ThreadConfig, tasks: int, cores: Optional[int] = None) -> ThreadConfig:
    """The pools left unset sized to one task's share of the host's cores, when `tasks`
    tasks of a cluster run on this host. TensorFlow sizes each process's pools to all
    the cores, so co-located workers oversubscribed them: two all-reduce workers on 2
    cores trained 0.87 of one process's examples/s with their defaults (see
    docs/distributed.md for the measured gain)."""
    if tasks <= 1:
        return config
    share = max(1, (cores or os.cpu_count() or 1) // tasks)
    return dataclasses.replace(config, inter_op_threads=config.inter_op_threads or share,
                               intra_op_threads=config.intra_op_threads or share,
                               tasks_sharing_host=tasks)


def apply(config: ThreadConfig):
    """Sets the threads before TensorFlow initialises (a RuntimeError after: call it
    before any op), and logs them when any is set."""
    if config.gpu_thread_mode is not None:
        os.environ[MODE_ENV] = config.gpu_thread_mode
    if config.gpu_thread_count is not None:
        os.environ[COUNT_ENV] = str(config.gpu_thread_count)
    if config.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(config.inter_op_threads)
    if config.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(config.intra_op_threads)
    if config.tasks_sharing_host > 1:
        logging.info('Threads: %s (%d workers of the cluster share this host; pass '
                     '--inter_op_threads and --intra_op_threads to size them yourself).',
                     describe(), config.tasks_sharing_host)
    elif config != ThreadConfig():
        logging.info('Threads: %s.', describe())


def describe() -> str:
    """The settings in effect, as TensorFlow and the environment hold them."""
    def pool(count):
        return str(count) if count else 'TensorFlow\'s choice'

    mode = os.environ.get(MODE_ENV, 'global')
    count = f', {os.environ.get(COUNT_ENV, "2")} threads' if mode != 'global' else ''
    return (f'inter-op {pool(tf.config.threading.get_inter_op_parallelism_threads())}, '
            f'intra-op {pool(tf.config.threading.get_intra_op_parallelism_threads())}; '
            f'GPU thread mode {mode}{count}')
