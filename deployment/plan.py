"""One deployment plan per mode: the strategy, how gradients are aggregated, the inner
loop (`train_n_steps`) and where it runs, chosen once from the DeploymentConfig.

| mode                          | aggregation           | inner loop        | runner            | calls agreed    |
|-------------------------------|-----------------------|-------------------|-------------------|-----------------|
| one device, clones            | all-reduce (clones)   | ReplicaSteps      | LocalRunner       | -               |
| multi-worker all-reduce       | all-reduce (everyone) | ReplicaSteps      | LocalRunner       | across workers  |
| async parameter servers       | none                  | ReplicaSteps      | CoordinatorRunner | -               |
| sync replicas (ps + backups)  | mean of N (ps)        | SyncReplicaSteps  | SyncReplicasRunner| -               |

Nothing above this package branches on the mode: the training loop asks the plan.
`describe_plan` writes the block the chief logs at start.
"""
import dataclasses
from typing import Callable, Optional, Sequence, Tuple

import tensorflow as tf

from core.errors import ClusterTaskFailed
from deployment import (aggregation, collectives, device_input, input_positions,
                        model_deploy, runners)
from deployment.agreement import LEAVE_TIMEOUT_SECS, CallPlan, CrossWorkerAgreement
from deployment.model_deploy import MULTI_WORKER, PARAMETER_SERVER
from deployment.steps import ReplicaSteps
from deployment.sync_replicas_runner import SyncReplicasRunner
from deployment.sync_replicas_steps import SyncReplicaSteps


@dataclasses.dataclass(frozen=True)
class DeploymentPlan:
    """What the training loop needs to know of the deployment, and its inner loop."""
    strategy: tf.distribute.Strategy
    is_chief: bool = True
    # Each update averages this many workers' gradients (sync replicas); None: no.
    replicas_to_aggregate: Optional[int] = None
    # Every task's host:port in a cluster: a profiler trace covers them all.
    task_addresses: Tuple[str, ...] = ()
    # Multi-worker all-reduce: every worker's call lengths and stops agree.
    agreement: Optional[CrossWorkerAgreement] = None
    # The flags' deployment (defaults where the strategy was made by hand).
    config: model_deploy.DeploymentConfig = dataclasses.field(
        default_factory=model_deploy.DeploymentConfig)

    @property
    def _parameter_servers(self) -> bool:
        return aggregation.is_parameter_server(self.strategy)

    @property
    def single_device(self) -> bool:
        """One replica in this process: XLA can compile the step."""
        return self.strategy.num_replicas_in_sync == 1 and not self._parameter_servers

    @property
    def steps_share_one_generator(self) -> bool:
        """Whether dropout's generator, a variable of this process, can be drawn from
        (not on parameter servers, where each step runs on any worker)."""
        return not self._parameter_servers

    @property
    def factors_weight_gradients(self) -> bool:
        """Whether matmul weights' gradients cross workers as their factors where smaller
        (multi-worker all-reduce, unless --noall_reduce_weight_factors)."""
        return self.agreement is not None and self.config.all_reduce.weight_factors

    def examples_per_update(self, batch_size: int) -> int:
        """Examples one global step trains on."""
        return (batch_size * self.strategy.num_replicas_in_sync
                * (self.replicas_to_aggregate or 1))

    def inner_loop(self, model_step, input_fn: Callable, jit_compile: bool = False,
                   checkpointable_input: bool = False):
        """The object whose `train_n_steps(n)` trains n steps in one call.
        checkpointable_input: the input's position is to be checkpointed, so a worker of
        a multi-worker all-reduce reads through its own tf.data iterator (not
        prefetched to the device by the strategy)."""
        if jit_compile and not self.single_device:
            raise ValueError('XLA compiles the step on one device only.')
        options = self.config.prefetch.input_options  # --prefetch_to_device
        if self.replicas_to_aggregate is not None:
            return SyncReplicaSteps(
                self.strategy, model_step,
                lambda sync: SyncReplicasRunner(self.strategy, input_fn, sync.global_step,
                                                input_options=options),
                self.replicas_to_aggregate)
        if self._parameter_servers:
            return ReplicaSteps(self.strategy, model_step,
                                runners.CoordinatorRunner(self.strategy, input_fn,
                                                          input_options=options),
                                aggregation.Independent())
        return ReplicaSteps(self.strategy, model_step,
                            runners.LocalRunner(self.strategy, input_fn,
                                                cluster=self._all_reduce_cluster(),
                                                input_options=options,
                                                checkpointable_input=checkpointable_input),
                            aggregation.AllReduce(), jit_compile=jit_compile,
                            capture_in_every_step=self.agreement is not None,
                            factor_weights=self.factors_weight_gradients)

    def agree(self, proposal: CallPlan) -> CallPlan:
        """The next call's length and whether to stop, the same on every worker."""
        if not self.agreement:
            return proposal
        with runners.task_failures_named(self._all_reduce_cluster(),
                                         runners.RESTART_ALL_WORKERS):
            return self.agreement.agree(proposal)

    def leave_together(self):
        """After the last call: every worker of a multi-worker all-reduce waits for the
        others to finish theirs before going on (to the chief's final save, or to exit).
        A worker that stops answering meanwhile, or none within LEAVE_TIMEOUT_SECS, ends
        in one line."""
        cluster = self._all_reduce_cluster()
        if sum(len(hosts) for hosts in (cluster or {}).values()) < 2:
            return  # no other worker (and no coordination service) to wait for
        try:
            self.agreement.leave_together()
        except tf.errors.DeadlineExceededError:
            raise ClusterTaskFailed(
                f'A worker did not finish its last call within {LEAVE_TIMEOUT_SECS} s of '
                f'the others; {runners.RESTART_ALL_WORKERS}') from None
        except tf.errors.OpError as error:
            raise ClusterTaskFailed(
                f'{runners.describe_failed_task(error, cluster)} stopped answering at the '
                f'end of training; {runners.RESTART_ALL_WORKERS}') from None

    def worker_input_positions(self, steps, *, train_dir: str,
                               latest_checkpoint: Callable[[], Optional[str]],
                               final_step: Optional[int] = None):
        """Where each worker saves its own input position (multi-worker all-reduce read
        through a checkpointable input, see inner_loop): restores this worker's for the
        step its model was restored at and writes it at the steps of the chief's
        checkpoints (latest_checkpoint: the chief's newest; final_step: the last step,
        saved with no agreement after it). None elsewhere: the input's
        position joins the model checkpoint (runner.checkpointable_iterator) or is not
        checkpointed."""
        worker = steps.runner.worker_iterator() if self.agreement else None
        if worker is None:
            return None
        iterator, context = worker
        global_step = steps.model_step.global_step
        positions = input_positions.WorkerInputPositions(
            train_dir=train_dir, worker=context.input_pipeline_id,
            num_workers=context.num_input_pipelines, iterator=iterator,
            current_step=lambda: int(global_step.numpy()), final_step=final_step)
        positions.restore()
        steps.runner.after_call.append(positions.after_call)
        self.agreement.saved_step = lambda: input_positions.checkpoint_step(
            latest_checkpoint())
        self.agreement.listeners.append(positions.after_agreement)
        return positions

    def _all_reduce_cluster(self) -> Optional[dict]:
        """{job: [host:port, ...]} of a multi-worker all-reduce, else None."""
        if self.agreement is None:
            return None
        return self.strategy.cluster_resolver.cluster_spec().as_dict()

    def describe(self, *, batch_size: int, train_dir: str, extra: Sequence[str] = (),
                 input_source: Optional[str] = None,
                 checkpoint_input_position: bool = True) -> str:
        return describe_plan(
            self.config, self.strategy, batch_size=batch_size, train_dir=train_dir,
            extra=extra, input_source=input_source,
            checkpoint_input_position=checkpoint_input_position)


def for_strategy(strategy: tf.distribute.Strategy, *, is_chief: bool = True,
                 replicas_to_aggregate: Optional[int] = None,
                 task_addresses: Sequence[str] = (),
                 config: Optional[model_deploy.DeploymentConfig] = None) -> DeploymentPlan:
    """The plan for a strategy made already (tests, benchmarks, create below)."""
    is_ps = aggregation.is_parameter_server(strategy)
    if replicas_to_aggregate is not None and not is_ps:
        raise ValueError('Sync replicas need a ParameterServerStrategy.')
    multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    return DeploymentPlan(
        strategy=strategy, is_chief=is_chief, replicas_to_aggregate=replicas_to_aggregate,
        task_addresses=tuple(task_addresses),
        agreement=(CrossWorkerAgreement(strategy, is_chief)
                   if multi_worker else None),
        config=config or model_deploy.DeploymentConfig())


def create(config: model_deploy.DeploymentConfig) -> DeploymentPlan:
    """Creates the strategy and the plan; call before any other TensorFlow op (clones on
    CPU and multi-worker training configure devices). Not for tasks that only serve."""
    strategy = model_deploy.create_strategy(config)
    cluster = config.cluster
    return for_strategy(
        strategy, is_chief=config.is_chief,
        replicas_to_aggregate=config.replicas_to_aggregate if config.sync_replicas else None,
        task_addresses=cluster.ps + cluster.workers if cluster else (), config=config)


# Where each worker's input comes from without the tf.data service (datasets.input_pipeline).
_WORKERS_INPUT = {
    MULTI_WORKER: 'each worker reads its own shard of the split\'s files (of its records '
                  'if there are fewer files than workers)',
    PARAMETER_SERVER: 'each worker reads the whole split in its own shuffled order (not '
                      'sharded)',
}


def _input_position(mode: str, saved_if_possible: bool, from_service: bool,
                    clustered: bool) -> str:
    """Whether checkpoints hold the input position, and why not."""
    if from_service:
        why = 'the tf.data service\'s job holds it; a resumed run rejoins the job'
    elif not saved_if_possible:
        why = '--nocheckpoint_input_position; a resumed run reads a fresh shuffle'
    elif mode == MULTI_WORKER and clustered:
        return ('saved with each checkpoint, each worker its own iterator\'s '
                f'(<train_dir>/{input_positions.POSITIONS_DIR}/): a resumed cluster of '
                'as many workers reads on from it')
    elif mode in _WORKERS_INPUT:
        # Parameter servers: each step runs on whichever worker is free, each worker's
        # iterator lives in its own process, and the chief alone saves.
        why = ('each worker\'s iterator is its own and the chief alone saves; a resumed '
               'run reads a fresh shuffle')
    else:
        return 'saved with each checkpoint: a resumed run reads on from it'
    return f'not checkpointed ({why})'


def _device_lines(config: model_deploy.DeploymentConfig) -> list:
    """The GPU-host options a run changed from TensorFlow's defaults."""
    lines = []
    if config.all_reduce != collectives.AllReduceConfig():
        lines.append(f'all-reduce:   {config.all_reduce.describe()}')
    if config.prefetch != device_input.DevicePrefetch():
        lines.append(f'device input: {config.prefetch.describe()}')
    return lines


def describe_plan(config: model_deploy.DeploymentConfig,
                  strategy: tf.distribute.Strategy, *, batch_size: int, train_dir: str,
                  extra: Sequence[str] = (), input_source: Optional[str] = None,
                  checkpoint_input_position: bool = True) -> str:
    """The plan the chief logs at start, one block. input_source: where the input comes
    from when not from the files read by each worker (the tf.data service)."""
    mode = config.mode
    replicas = strategy.num_replicas_in_sync
    cluster = config.cluster
    lines = [f'strategy:     {mode} ({type(strategy).__name__})']
    if cluster is not None:
        lines.append(f'cluster:      {cluster.describe()} (from {cluster.source})')
    if mode == PARAMETER_SERVER and config.sync_replicas:
        needed = config.replicas_to_aggregate
        lines += [f'replicas:     {config.num_replicas} worker(s) ({replicas} replica(s) '
                  f'each), sync replicas: each update averages {needed} worker(s)\' '
                  f'gradients of one version, {config.num_replicas - needed} backup(s) '
                  'whose late gradients are dropped',
                  f'batch:        {batch_size} per replica, {batch_size * replicas * needed} '
                  'per update']
    elif mode == PARAMETER_SERVER:
        lines += [f'replicas:     {config.num_replicas} worker(s), each applying its own '
                  f'updates asynchronously ({replicas} replica(s) per worker)',
                  f'batch:        {batch_size} per replica, {batch_size * replicas} per '
                  'update']
    else:
        in_sync = (f'{config.num_replicas} worker(s) x {replicas // config.num_replicas} '
                   f'clone(s) = {replicas}' if mode == MULTI_WORKER else f'{replicas}')
        lines += [f'replicas:     {in_sync} in sync',
                  f'batch:        {batch_size} per replica, {batch_size * replicas} '
                  'global']
    from_service = input_source is not None
    input_source = input_source or _WORKERS_INPUT.get(mode)
    if input_source:
        lines.append(f'input:        {input_source}')
    lines.append('input position: ' + _input_position(
        mode, checkpoint_input_position, from_service, clustered=cluster is not None))
    lines += _device_lines(config)
    lines += list(extra)
    writer = 'worker 0 (the chief)' if cluster is not None else 'this process'
    lines.append(f'checkpoints:  written by {writer} to {train_dir}')
    return 'Deployment plan:\n' + '\n'.join('  ' + line for line in lines)
