"""DeploymentConfig: slim's deployment flags, mapped to a tf.distribute strategy."""
import dataclasses

import tensorflow as tf

from core.errors import UsageError


@dataclasses.dataclass(frozen=True)
class DeploymentConfig:
    """Where the model runs. Field names and defaults are TF-Slim's model_deploy ones."""
    num_clones: int = 1
    clone_on_cpu: bool = False
    replica_id: int = 0
    num_replicas: int = 1
    num_ps_tasks: int = 0
    worker_job_name: str = 'worker'
    ps_job_name: str = 'ps'
    # train_image_classifier's flags for synchronous updates over parameter servers.
    sync_replicas: bool = False
    replicas_to_aggregate: int = 1

    def __post_init__(self):
        if self.num_clones < 1:
            raise UsageError(f'--num_clones must be at least 1, got {self.num_clones}.')
        if self.num_replicas < 1:
            raise UsageError(
                f'--worker_replicas must be at least 1, got {self.num_replicas}.')
        if not 0 <= self.replica_id < self.num_replicas:
            raise UsageError(f'--task={self.replica_id} is out of range for '
                             f'{self.num_replicas} worker replicas; use 0..'
                             f'{self.num_replicas - 1}.')
        if self.num_ps_tasks < 0:
            raise UsageError(f'--num_ps_tasks must be >= 0, got {self.num_ps_tasks}.')
        if self.replicas_to_aggregate < 1:
            raise UsageError(f'--replicas_to_aggregate must be at least 1, got '
                             f'{self.replicas_to_aggregate}.')

    @property
    def gradients_per_update(self) -> int:
        """Replicas' batches one update averages: --replicas_to_aggregate when synced."""
        return self.replicas_to_aggregate if self.sync_replicas else 1

    @property
    def is_chief(self) -> bool:
        return self.replica_id == 0


def _ensure_logical_cpus(count: int):
    """Splits the CPU into `count` logical devices so clones can run on one machine."""
    cpu = tf.config.list_physical_devices('CPU')[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError as error:
        # TensorFlow already started; fine if an earlier split gave enough devices.
        # (Listing logical devices starts TensorFlow, so it comes second.)
        if len(tf.config.list_logical_devices('CPU')) < count:
            raise UsageError(
                f'Cannot split the CPU into {count} clones after TensorFlow started; '
                f'create the strategy before running any TensorFlow op.') from error


def create_strategy(config: DeploymentConfig) -> tf.distribute.Strategy:
    """The strategy for a deployment; one training loop serves all of them."""
    if (config.num_ps_tasks > 0 or config.num_replicas > 1 or config.sync_replicas
            or config.replicas_to_aggregate != 1):
        raise NotImplementedError(
            'Multi-worker, parameter-server and sync-replicas training (--worker_replicas '
            '> 1, --num_ps_tasks > 0, --sync_replicas, --replicas_to_aggregate) are not '
            'implemented yet; train on one machine with --num_clones for now.')
    if config.num_clones == 1:
        if config.clone_on_cpu:
            return tf.distribute.OneDeviceStrategy('/cpu:0')
        return tf.distribute.get_strategy()
    if config.clone_on_cpu:
        _ensure_logical_cpus(config.num_clones)
        devices = [f'/cpu:{i}' for i in range(config.num_clones)]
        # NCCL is GPU-only; reduce on one device instead.
        return tf.distribute.MirroredStrategy(
            devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
    gpus = tf.config.list_logical_devices('GPU')
    if len(gpus) < config.num_clones:
        raise UsageError(
            f'--num_clones={config.num_clones} needs {config.num_clones} GPUs but '
            f'{len(gpus)} are visible; pass --clone_on_cpu or lower --num_clones.')
    return tf.distribute.MirroredStrategy(
        [f'/gpu:{i}' for i in range(config.num_clones)])
