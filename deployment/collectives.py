"""How replicas all-reduce their gradients: the TF Model Garden's --all_reduce_alg and
--num_packs, mapped to the strategy's collective implementation.

| --all_reduce_alg  | clones on one host: MirroredStrategy | workers: MultiWorkerMirrored |
|-------------------|--------------------------------------|------------------------------|
| unset (default)   | TensorFlow's choice (CPU clones:     | CommunicationImplementation  |
|                   | ReductionToOneDevice)                | .AUTO                        |
| nccl              | NcclAllReduce(num_packs)             | .NCCL                        |
| hierarchical_copy | HierarchicalCopyAllReduce(num_packs) | refused                      |
| ring              | refused                              | .RING                        |

`check` refuses, before any server starts, what cannot work in a deployment mode (the
names of deployment.model_deploy); the strategy's builder then asks `cross_device_ops`
or `communication_options`, which refuse the GPU algorithms where no GPU is visible.
"""
import dataclasses
from typing import Optional

import tensorflow as tf

from core.errors import UsageError

NCCL, HIERARCHICAL_COPY, RING = 'nccl', 'hierarchical_copy', 'ring'
# The algorithms each all-reducing deployment mode takes (model_deploy's mode names).
_BY_MODE = {'mirrored': (NCCL, HIERARCHICAL_COPY), 'multi_worker': (RING, NCCL)}
_GPU_ONLY = (NCCL, HIERARCHICAL_COPY)
_CHOICES = ('use ring or nccl for workers, nccl or hierarchical_copy for clones on GPUs, '
            'or leave it unset for TensorFlow\'s choice')


@dataclasses.dataclass(frozen=True)
class AllReduceConfig:
    """--all_reduce_alg ('' : TensorFlow's choice) and --num_packs (how many packs the
    clones' gradients are batched into; 0: none)."""
    algorithm: str = ''
    num_packs: int = 1
    # Between workers: gradients all-reduced in packs of about this size (0: one pack).
    bytes_per_pack: int = 0
    # Between workers: matmul weights' gradients as factors where they are smaller
    # (deployment.weight_factors).
    weight_factors: bool = True

    def __post_init__(self):
        if self.algorithm and self.algorithm not in (NCCL, HIERARCHICAL_COPY, RING):
            raise UsageError(f'Unknown --all_reduce_alg={self.algorithm}; {_CHOICES}.')
        if self.num_packs < 0:
            raise UsageError(f'--num_packs must be at least 0, got {self.num_packs}.')
        if self.bytes_per_pack < 0:
            raise UsageError('--all_reduce_bytes_per_pack must be at least 0, got '
                             f'{self.bytes_per_pack}.')

    def describe(self) -> str:
        packs = f', {self.num_packs} pack(s)' if self.num_packs != 1 else ''
        if self.bytes_per_pack:
            packs += f', packs of {self.bytes_per_pack} bytes'
        if not self.weight_factors:
            packs += ', no weight factors'
        return (self.algorithm or 'TensorFlow\'s choice') + packs


def check(config: AllReduceConfig, mode: str, clone_on_cpu: bool):
    """Refuses an all-reduce setting that cannot work in this deployment mode."""
    name = f'--all_reduce_alg={config.algorithm}'
    allowed = _BY_MODE.get(mode)
    if config.algorithm and allowed is None:
        what = ('one device has nothing to all-reduce' if mode == 'one_device' else
                'parameter servers aggregate the updates themselves')
        raise UsageError(f'{name} applies to clones (--num_clones) and to workers without '
                         f'ps tasks; {what}: drop it.')
    if config.algorithm and config.algorithm not in allowed:
        fix = ('workers use ring or nccl' if mode == 'multi_worker' else
               'clones on one host use nccl or hierarchical_copy (GPUs)')
        raise UsageError(f'{name} does not apply to {mode} training; {fix}, or leave it '
                         'unset.')
    if config.algorithm in _GPU_ONLY and clone_on_cpu:
        raise UsageError(f'{name} runs on GPUs, not with --clone_on_cpu; drop one of them '
                         '(CPU replicas reduce on one device, or over ring between '
                         'workers).')
    if config.bytes_per_pack and mode != 'multi_worker':
        raise UsageError(f'--all_reduce_bytes_per_pack={config.bytes_per_pack} applies to '
                         'workers without ps tasks; drop it.')
    if config.num_packs != 1 and not (mode == 'mirrored' and config.algorithm in _GPU_ONLY):
        raise UsageError(f'--num_packs={config.num_packs} applies to clones with '
                         '--all_reduce_alg=nccl or hierarchical_copy; drop it.')


def _needs_gpus(config: AllReduceConfig, num_gpus: int):
    if config.algorithm in _GPU_ONLY and num_gpus < 1:
        raise UsageError(f'--all_reduce_alg={config.algorithm} needs GPUs and none is '
                         'visible; leave it unset (or use ring between workers).')


def cross_device_ops(config: AllReduceConfig, *, clone_on_cpu: bool,
                     num_gpus: int) -> Optional[tf.distribute.CrossDeviceOps]:
    """A MirroredStrategy's cross-device ops; None: TensorFlow's choice (GPU clones)."""
    if clone_on_cpu:  # NCCL is GPU-only; reduce on one device instead
        return tf.distribute.ReductionToOneDevice()
    _needs_gpus(config, num_gpus)
    if config.algorithm == NCCL:
        return tf.distribute.NcclAllReduce(num_packs=config.num_packs)
    if config.algorithm == HIERARCHICAL_COPY:
        return tf.distribute.HierarchicalCopyAllReduce(num_packs=config.num_packs)
    return None


def communication_options(config: AllReduceConfig, *,
                          num_gpus: int) -> tf.distribute.experimental.CommunicationOptions:
    """A MultiWorkerMirroredStrategy's communication options: AUTO when unset."""
    _needs_gpus(config, num_gpus)
    implementation = tf.distribute.experimental.CommunicationImplementation
    chosen = {RING: implementation.RING, NCCL: implementation.NCCL}.get(
        config.algorithm, implementation.AUTO)
    return tf.distribute.experimental.CommunicationOptions(
        implementation=chosen, bytes_per_pack=config.bytes_per_pack)
