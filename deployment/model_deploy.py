"""DeploymentConfig: slim's deployment flags, mapped to a tf.distribute strategy.

| flags                                   | mode             | strategy                            |
|-----------------------------------------|------------------|-------------------------------------|
| defaults                                | one_device       | the default strategy                |
| --num_clones=N                          | mirrored         | MirroredStrategy, N GPUs or N CPUs  |
| --worker_replicas=M (a cluster, no PS)  | multi_worker     | MultiWorkerMirroredStrategy         |
| --num_ps_tasks=K (a cluster with K ps)  | parameter_server | ParameterServerStrategy, async      |

`--strategy` forces a mode. The cluster (deployment.cluster) comes from
--ps_hosts/--worker_hosts/--job_name/--task, TF_CONFIG or SLURM; --worker_replicas and
--num_ps_tasks may then be left unset, and must agree with it when set. In
parameter-server modes worker 0 (the chief) runs the coordinator and a worker server of
its own; the other workers and the ps tasks only serve (deployment.task_server) until
the chief is gone.
The all-reduce implementation (deployment.collectives) and the input's prefetch to the
devices (deployment.device_input) are part of the config; deployment.plan describes it.
"""
import dataclasses
from typing import Optional, Sequence

import tensorflow as tf

from core.errors import UsageError
from deployment import cluster as cluster_lib
from deployment import collectives, device_input

ONE_DEVICE, MIRRORED, MULTI_WORKER, PARAMETER_SERVER = (
    'one_device', 'mirrored', 'multi_worker', 'parameter_server')
STRATEGIES = ('auto', ONE_DEVICE, MIRRORED, MULTI_WORKER, PARAMETER_SERVER)
# Variables at least this large are split over the parameter servers.
MIN_SHARD_BYTES = 256 << 10
# How long ps and worker tasks wait for a chief that has not started yet.
CHIEF_START_SECS = 600


@dataclasses.dataclass(frozen=True)
class DeploymentConfig:
    """Where the model runs. Field names and defaults are TF-Slim's model_deploy ones,
    plus the strategy, the cluster and train_image_classifier's sync-replicas flags."""
    num_clones: int = 1
    clone_on_cpu: bool = False
    replica_id: int = 0
    num_replicas: int = 1
    num_ps_tasks: int = 0
    worker_job_name: str = 'worker'
    ps_job_name: str = 'ps'
    sync_replicas: bool = False
    replicas_to_aggregate: int = 1
    strategy: str = 'auto'
    cluster: Optional[cluster_lib.Cluster] = None
    # How long a ps or worker task keeps serving after the chief became unreachable.
    wait_for_chief_secs: float = 60.0
    # The launcher's time from SIGTERM to SIGKILL (Kubernetes' and SLURM's default: 30 s).
    preemption_grace_secs: float = 30.0
    # GPU hosts: the all-reduce implementation and the input's prefetch to the devices.
    all_reduce: collectives.AllReduceConfig = collectives.AllReduceConfig()
    prefetch: device_input.DevicePrefetch = device_input.DevicePrefetch()

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
        if self.strategy not in STRATEGIES:
            raise UsageError(f'Unknown --strategy={self.strategy}; use one of '
                             f'{", ".join(STRATEGIES)}.')
        self._check_cluster()
        self._check_mode()

    def _check_cluster(self):
        cluster = self.cluster
        if cluster is None:
            if self.num_ps_tasks:
                raise UsageError(
                    f'--num_ps_tasks={self.num_ps_tasks} needs the parameter servers\' '
                    'addresses: pass --ps_hosts and --worker_hosts (or set TF_CONFIG, or '
                    'run under SLURM).')
            if self.num_replicas > 1:
                raise UsageError(
                    f'--worker_replicas={self.num_replicas} needs the workers\' addresses: '
                    'pass --worker_hosts (or set TF_CONFIG, or run under SLURM).')
            return
        if self.num_replicas != len(cluster.workers):
            raise UsageError(f'--worker_replicas={self.num_replicas} but the cluster from '
                             f'{cluster.source} has {len(cluster.workers)} worker(s); make them agree (or '
                             'leave --worker_replicas unset).')
        if self.num_ps_tasks != len(cluster.ps):
            raise UsageError(f'--num_ps_tasks={self.num_ps_tasks} but the cluster from '
                             f'{cluster.source} has {len(cluster.ps)} ps task(s); make them agree (or '
                             'leave --num_ps_tasks unset).')

    def _check_mode(self):
        mode = self.mode
        if mode == ONE_DEVICE and self.num_clones > 1:
            raise UsageError(f'--strategy=one_device runs one clone; drop '
                             f'--num_clones={self.num_clones} or use --strategy=mirrored.')
        if mode in (ONE_DEVICE, MIRRORED) and (self.num_replicas > 1 or self.num_ps_tasks):
            raise UsageError(f'--strategy={mode} trains on one machine, but the cluster has '
                             f'{self.num_replicas} worker(s) and {self.num_ps_tasks} ps '
                             'task(s); use --strategy=auto.')
        if mode == MULTI_WORKER and self.num_ps_tasks:
            raise UsageError('--strategy=multi_worker uses no parameter servers; drop the '
                             'ps tasks (--ps_hosts, --num_ps_tasks) or use '
                             '--strategy=parameter_server.')
        if mode == MULTI_WORKER and self.clone_on_cpu and self.num_clones > 1:
            raise UsageError('Multi-worker training runs one CPU replica per worker; drop '
                             '--clone_on_cpu or --num_clones (GPU clones are fine).')
        if self.sync_replicas and mode != PARAMETER_SERVER:
            raise UsageError('--sync_replicas aggregates gradients on parameter servers; add '
                             'ps tasks (--ps_hosts, --num_ps_tasks), or drop it (clones and '
                             '--worker_replicas without ps tasks are always synchronous).')
        if not self.sync_replicas and self.replicas_to_aggregate != 1:
            raise UsageError(f'--replicas_to_aggregate={self.replicas_to_aggregate} needs '
                             '--sync_replicas; add it, or drop --replicas_to_aggregate.')
        if self.sync_replicas and self.replicas_to_aggregate > self.num_replicas:
            raise UsageError(f'--replicas_to_aggregate={self.replicas_to_aggregate} is more '
                             f'than the {self.num_replicas} worker(s); each update takes one '
                             'gradient per worker at most: lower it.')
        if mode == PARAMETER_SERVER and not self.num_ps_tasks:
            raise UsageError('--strategy=parameter_server needs ps tasks: pass --ps_hosts '
                             '(or TF_CONFIG / SLURM) and --num_ps_tasks.')
        collectives.check(self.all_reduce, mode, self.clone_on_cpu)

    @property
    def mode(self) -> str:
        """The strategy this deployment uses: --strategy, or chosen from the flags."""
        if self.strategy != 'auto':
            return self.strategy
        if self.num_ps_tasks:
            return PARAMETER_SERVER
        if self.num_replicas > 1:
            return MULTI_WORKER
        if self.num_clones > 1:
            return MIRRORED
        return ONE_DEVICE

    @property
    def gradients_per_update(self) -> int:
        """Replicas' batches one update averages: --replicas_to_aggregate when synced."""
        return self.replicas_to_aggregate if self.sync_replicas else 1

    @property
    def is_chief(self) -> bool:
        return self.cluster is None or self.cluster.is_chief

    @property
    def serves_only(self) -> bool:
        """A parameter-server-mode task other than the chief: it serves, it does not loop."""
        return self.mode == PARAMETER_SERVER and not self.is_chief

    # --- slim's device helpers, naming the devices the strategy really uses. ---

    @property
    def worker_device(self) -> str:
        if self.mode == PARAMETER_SERVER:  # a step runs on whichever worker is free
            return f'/job:{self.worker_job_name}'
        if self.mode == MULTI_WORKER:
            return f'/job:{self.worker_job_name}/task:{self.replica_id}'
        return ''

    def _check_clone_index(self, clone_index: int):
        if not 0 <= clone_index < self.num_clones:
            raise ValueError(f'clone_index must be less than num_clones '
                             f'({self.num_clones}), got {clone_index}.')

    def clone_device(self, clone_index: int) -> str:
        """The device clone `clone_index` computes on, e.g. '/job:worker/device:GPU:1'."""
        self._check_clone_index(clone_index)
        if self.clone_on_cpu:
            # Clones on CPU are logical CPU devices, one each.
            return f'{self.worker_device}/device:CPU:{clone_index}'
        if self.num_clones == 1 and not tf.config.list_physical_devices('GPU'):
            return f'{self.worker_device}/device:CPU:0'
        return f'{self.worker_device}/device:GPU:{clone_index}'

    def clone_scope(self, clone_index: int) -> str:
        """slim's name scope of a clone: '' for one clone, else 'clone_<i>'."""
        self._check_clone_index(clone_index)
        return '' if self.num_clones == 1 else f'clone_{clone_index}'

    def variables_device(self, variable_index: int = 0) -> str:
        """Where the `variable_index`-th variable created lives: round-robin over the ps
        tasks, or (mirrored) the first clone's copy."""
        if self.num_ps_tasks:
            return (f'/job:{self.ps_job_name}/task:{variable_index % self.num_ps_tasks}'
                    '/device:CPU:0')
        return self.clone_device(0)

    def optimizer_device(self) -> str:
        """Where updates run: beside each variable (its ps task, or each clone's copy);
        this names the first variable's."""
        return self.variables_device(0)

    def inputs_device(self) -> str:
        """Where the input pipeline runs: the CPU of the worker computing the step."""
        return f'{self.worker_device}/device:CPU:0'


def from_flags(*, num_clones: int = 1, clone_on_cpu: bool = False,
               worker_replicas: Optional[int] = None, num_ps_tasks: Optional[int] = None,
               task: int = 0, sync_replicas: bool = False, replicas_to_aggregate: int = 1,
               strategy: str = 'auto', cluster: Optional[cluster_lib.Cluster] = None,
               wait_for_chief_secs: float = 60.0, preemption_grace_secs: float = 30.0,
               all_reduce: collectives.AllReduceConfig = collectives.AllReduceConfig(),
               prefetch: device_input.DevicePrefetch = device_input.DevicePrefetch()
               ) -> DeploymentConfig:
    """A DeploymentConfig whose unset worker/ps counts and task come from the cluster."""
    if cluster is not None:
        is_worker = cluster.task_type == cluster_lib.WORKER
        replica_id = cluster.task_index if is_worker else 0
        worker_replicas = worker_replicas or len(cluster.workers)
        num_ps_tasks = len(cluster.ps) if num_ps_tasks is None else num_ps_tasks
    else:
        replica_id = task
    return DeploymentConfig(
        num_clones=num_clones, clone_on_cpu=clone_on_cpu, replica_id=replica_id,
        num_replicas=worker_replicas or 1, num_ps_tasks=num_ps_tasks or 0,
        sync_replicas=sync_replicas, replicas_to_aggregate=replicas_to_aggregate,
        strategy=strategy, cluster=cluster, wait_for_chief_secs=wait_for_chief_secs,
        preemption_grace_secs=preemption_grace_secs, all_reduce=all_reduce, prefetch=prefetch)


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


def _limit_gpus(count: int):
    """Makes only the first `count` GPUs visible (MultiWorkerMirroredStrategy uses all)."""
    gpus = tf.config.list_physical_devices('GPU')
    if count == 1 and not gpus:
        return  # one CPU replica
    if len(gpus) < count:
        raise UsageError(f'--num_clones={count} needs {count} GPUs per worker but '
                         f'{len(gpus)} are visible; lower --num_clones.')
    tf.config.set_visible_devices(gpus[:count], 'GPU')


# Servers cannot be shut down in TF 2.21; they live as long as the process.
_SERVERS = []


def start_server(deployment: DeploymentConfig, **kwargs) -> tf.distribute.Server:
    cluster = deployment.cluster
    cluster_lib.check_port_free(cluster)
    server = tf.distribute.Server(tf.train.ClusterSpec(cluster.as_dict()),
                                  job_name=cluster.task_type, task_index=cluster.task_index,
                                  protocol='grpc', start=True, **kwargs)
    _SERVERS.append(server)
    return server


def _cluster_resolver(config: DeploymentConfig, with_task: bool):
    task = dict(task_type=config.cluster.task_type,
                task_id=config.cluster.task_index) if with_task else {}
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(config.cluster.as_dict()), rpc_layer='grpc', **task)


def create_strategy(config: DeploymentConfig) -> tf.distribute.Strategy:
    """The strategy for a deployment; one training loop serves all of them.

    Call it before any other TensorFlow op: clones on CPU and multi-worker training
    configure devices. Not for tasks that only serve (`config.serves_only`): see `serve`.
    """
    if config.serves_only:
        raise ValueError('This task only serves; call serve(), not create_strategy().')
    mode = config.mode
    if mode == MULTI_WORKER:
        if not config.clone_on_cpu:
            _limit_gpus(config.num_clones)
        resolver = (_cluster_resolver(config, with_task=True) if config.cluster else
                    None)
        if config.cluster:
            cluster_lib.check_port_free(config.cluster)
        gpus = 0 if config.clone_on_cpu else len(tf.config.list_physical_devices('GPU'))
        options = collectives.communication_options(config.all_reduce, num_gpus=gpus)
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver,
                                                         communication_options=options)
    if mode == PARAMETER_SERVER:
        # The chief computes too, as slim's worker 0 did: it hosts worker 0's server.
        # In-process servers deadlock with fewer inter-op threads than workers + 1.
        start_server(config, config=tf.compat.v1.ConfigProto(
            inter_op_parallelism_threads=max(4, config.num_replicas + 1)))
        partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=MIN_SHARD_BYTES, max_shards=config.num_ps_tasks)
        return tf.distribute.experimental.ParameterServerStrategy(
            _cluster_resolver(config, with_task=False), variable_partitioner=partitioner)
    if mode == ONE_DEVICE:
        if config.clone_on_cpu:
            return tf.distribute.OneDeviceStrategy('/cpu:0')
        return tf.distribute.get_strategy()
    if config.clone_on_cpu:
        _ensure_logical_cpus(config.num_clones)
    gpus = 0 if config.clone_on_cpu else len(tf.config.list_logical_devices('GPU'))
    if not config.clone_on_cpu and gpus < config.num_clones:
        raise UsageError(
            f'--num_clones={config.num_clones} needs {config.num_clones} GPUs but '
            f'{gpus} are visible; pass --clone_on_cpu or lower --num_clones.')
    device = 'cpu' if config.clone_on_cpu else 'gpu'
    return tf.distribute.MirroredStrategy(
        [f'/{device}:{i}' for i in range(config.num_clones)],
        cross_device_ops=collectives.cross_device_ops(
            config.all_reduce, clone_on_cpu=config.clone_on_cpu, num_gpus=gpus))


def variable_placement(variables: Sequence[tf.Variable]) -> dict:
    """{device: number of variables} (a partitioned variable counts once per piece)."""
    counts = {}
    for variable in variables:
        # Looked up on the class: an instance lookup on a per-replica (ON_READ) variable
        # falls through to its value, a cross-worker all-reduce only the chief ran.
        pieces = variable.variables if hasattr(type(variable), 'variables') else [variable]
        for piece in pieces:
            counts[piece.device] = counts.get(piece.device, 0) + 1
    return dict(sorted(counts.items()))
