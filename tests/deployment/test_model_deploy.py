import pytest
import tensorflow as tf

from deployment import cluster, model_deploy
from deployment import plan as deployment_plan
from core.errors import UsageError


def test_defaults_use_the_default_strategy():
    strategy = model_deploy.create_strategy(model_deploy.DeploymentConfig())
    assert strategy is tf.distribute.get_strategy()
    assert strategy.num_replicas_in_sync == 1


def test_clones_on_cpu_mirror_over_logical_devices():
    config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
    strategy = model_deploy.create_strategy(config)
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    assert strategy.num_replicas_in_sync == 2
    assert sorted(d.split('/')[-1] for d in strategy.extended.worker_devices) == [
        'device:CPU:0', 'device:CPU:1']


def test_more_cpu_clones_than_devices_after_start_is_a_usage_error():
    # conftest split the CPU in two before TensorFlow started; a third cannot be added.
    with pytest.raises(UsageError, match='before running any TensorFlow op'):
        model_deploy.create_strategy(
            model_deploy.DeploymentConfig(num_clones=3, clone_on_cpu=True))


def test_gpu_clones_without_gpus_name_the_fix():
    with pytest.raises(UsageError, match='--clone_on_cpu'):
        model_deploy.create_strategy(model_deploy.DeploymentConfig(num_clones=2))


@pytest.mark.parametrize('config,message', [
    (dict(sync_replicas=True), '--sync_replicas aggregates gradients on parameter servers'),
    (dict(num_clones=2, sync_replicas=True), 'add ps tasks'),
    (dict(replicas_to_aggregate=2), '--replicas_to_aggregate=2 needs --sync_replicas'),
])
def test_sync_replicas_misuse_names_the_fix(config, message):
    with pytest.raises(UsageError, match=message):
        model_deploy.DeploymentConfig(**config)


def test_sync_replicas_cannot_wait_for_more_workers_than_the_cluster_has():
    with pytest.raises(UsageError, match='--replicas_to_aggregate=3 is more than the 2 '
                                         'worker'):
        model_deploy.from_flags(sync_replicas=True, replicas_to_aggregate=3,
                                cluster=_cluster(ps=1, workers=2))
    config = model_deploy.from_flags(sync_replicas=True, replicas_to_aggregate=2,
                                     cluster=_cluster(ps=1, workers=3))
    assert (config.mode, config.gradients_per_update) == ('parameter_server', 2)


@pytest.mark.parametrize('config,message', [
    (dict(num_ps_tasks=1), '--num_ps_tasks=1 needs the parameter servers'),
    (dict(num_replicas=2), '--worker_replicas=2 needs the workers'),
    (dict(num_clones=2, strategy='one_device'), '--strategy=one_device runs one clone'),
    (dict(strategy='parameter_server'), 'needs ps tasks'),
    (dict(strategy='sharded'), 'Unknown --strategy=sharded'),
])
def test_cluster_modes_without_a_cluster_name_the_fix(config, message):
    with pytest.raises(UsageError, match=message):
        model_deploy.DeploymentConfig(**config)


def _cluster(ps=0, workers=1, job='worker', task=0):
    return cluster.Cluster(ps=tuple(f'localhost:{100 + i}' for i in range(ps)),
                           workers=tuple(f'localhost:{200 + i}' for i in range(workers)),
                           task_type=job, task_index=task, source='a test')


@pytest.mark.parametrize('flags,mode', [
    (dict(), 'one_device'), (dict(num_clones=2, clone_on_cpu=True), 'mirrored'),
    (dict(cluster=_cluster(workers=2)), 'multi_worker'),
    (dict(cluster=_cluster(ps=2, workers=2)), 'parameter_server'),
    (dict(cluster=_cluster(workers=1), strategy='multi_worker'), 'multi_worker'),
])
def test_the_mode_follows_slims_flags(flags, mode):
    assert model_deploy.from_flags(**flags).mode == mode


def test_device_helpers_name_the_devices_of_each_mode():
    local = model_deploy.from_flags(num_clones=2, clone_on_cpu=True)
    assert [local.clone_device(i) for i in range(2)] == ['/device:CPU:0', '/device:CPU:1']
    assert [local.clone_scope(i) for i in range(2)] == ['clone_0', 'clone_1']
    assert local.variables_device() == local.optimizer_device() == '/device:CPU:0'
    assert local.inputs_device() == '/device:CPU:0'
    multi_worker = model_deploy.from_flags(cluster=_cluster(workers=3, task=2))
    assert multi_worker.clone_device(0) == '/job:worker/task:2/device:CPU:0'
    assert multi_worker.clone_scope(0) == ''
    ps = model_deploy.from_flags(num_clones=2, cluster=_cluster(ps=2, workers=2))
    assert ps.clone_device(1) == '/job:worker/device:GPU:1'
    assert ps.variables_device(1) == '/job:ps/task:1/device:CPU:0'
    assert ps.optimizer_device() == '/job:ps/task:0/device:CPU:0'
    assert ps.inputs_device() == '/job:worker/device:CPU:0'
    with pytest.raises(ValueError, match='clone_index must be less than num_clones'):
        ps.clone_device(2)


def test_clone_devices_are_the_mirrored_strategys_own():
    config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
    strategy = model_deploy.create_strategy(config)
    assert [d.split('/')[-1] for d in strategy.extended.worker_devices] == [
        config.clone_device(i).split('/')[-1] for i in range(2)]


def test_ps_tasks_and_non_chief_workers_only_serve():
    assert model_deploy.from_flags(cluster=_cluster(ps=1, workers=2, task=1)).serves_only
    assert model_deploy.from_flags(cluster=_cluster(ps=1, job='ps')).serves_only
    assert not model_deploy.from_flags(cluster=_cluster(ps=1, workers=2)).serves_only
    assert not model_deploy.from_flags(cluster=_cluster(workers=2, task=1)).serves_only
    with pytest.raises(UsageError, match='multi_worker uses no parameter servers'):
        model_deploy.from_flags(cluster=_cluster(ps=1, job='ps'), strategy='multi_worker')


def test_counts_given_on_the_command_line_must_match_the_cluster():
    with pytest.raises(UsageError, match='--worker_replicas=3 but the cluster from a test '
                                         'has 2 worker'):
        model_deploy.from_flags(worker_replicas=3, cluster=_cluster(workers=2))


def test_the_plan_is_one_block_naming_strategy_cluster_batch_and_writer():
    config = model_deploy.from_flags(num_clones=2, clone_on_cpu=True)
    strategy = model_deploy.create_strategy(config)
    plan = deployment_plan.describe_plan(config, strategy, batch_size=16, train_dir='/t',
                                         extra=['learning rate: 0.01, fixed'])
    assert plan.splitlines() == [
        'Deployment plan:',
        '  strategy:     mirrored (MirroredStrategy)',
        '  replicas:     2 in sync',
        '  batch:        16 per replica, 32 global',
        '  input position: saved with each checkpoint: a resumed run reads on from it',
        '  learning rate: 0.01, fixed',
        '  checkpoints:  written by this process to /t']


@pytest.mark.parametrize('config', [dict(num_clones=0), dict(num_replicas=0),
                                    dict(replica_id=2, num_replicas=2),
                                    dict(num_ps_tasks=-1), dict(replicas_to_aggregate=0)])
def test_invalid_values_are_usage_errors(config):
    with pytest.raises(UsageError):
        model_deploy.DeploymentConfig(**config)
