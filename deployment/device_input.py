"""Input prefetch to the devices: --prefetch_to_device and --per_replica_buffer_size as
the tf.distribute.InputOptions a strategy distributes the input with.

They reach every call that distributes input through a strategy: training's
`distribute_datasets_from_function` (deployment.runners: parameter-server workers, and
multi-worker all-reduce when the input position is not checkpointed) and evaluation's
`experimental_distribute_dataset` (training.evaluation.evaluator, with clones). The
default strategy (one device) ignores them, and clones on one host and all-reduce
workers saving their input position read one host iterator each, whose position
checkpoints can save (each batch is copied to its replica inside the step): there they
have no effect.
"""
import dataclasses

import tensorflow as tf

from core.errors import UsageError


@dataclasses.dataclass(frozen=True)
class DevicePrefetch:
    """to_device: prefetch batches into each replica's device memory (TensorFlow's
    default), else into host memory; buffer_size: batches prefetched per replica (0:
    none)."""
    to_device: bool = True
    buffer_size: int = 1

    def __post_init__(self):
        if self.buffer_size < 0:
            raise UsageError(f'--per_replica_buffer_size must be at least 0, got '
                             f'{self.buffer_size}.')

    @property
    def input_options(self) -> tf.distribute.InputOptions:
        return tf.distribute.InputOptions(
            experimental_fetch_to_device=self.to_device,
            experimental_per_replica_buffer_size=self.buffer_size)

    def describe(self) -> str:
        where = 'device' if self.to_device else 'host'
        return f'{self.buffer_size} batch(es) per replica prefetched to {where} memory'
