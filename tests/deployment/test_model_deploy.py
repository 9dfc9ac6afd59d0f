import pytest
import tensorflow as tf

from deployment import model_deploy
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


@pytest.mark.parametrize('config', [dict(num_ps_tasks=1), dict(num_replicas=2),
                                    dict(sync_replicas=True),
                                    dict(replicas_to_aggregate=2)])
def test_cluster_modes_say_they_are_not_implemented(config):
    with pytest.raises(NotImplementedError, match='not implemented yet'):
        model_deploy.create_strategy(model_deploy.DeploymentConfig(**config))


@pytest.mark.parametrize('config', [dict(num_clones=0), dict(num_replicas=0),
                                    dict(replica_id=2, num_replicas=2),
                                    dict(num_ps_tasks=-1), dict(replicas_to_aggregate=0)])
def test_invalid_values_are_usage_errors(config):
    with pytest.raises(UsageError):
        model_deploy.DeploymentConfig(**config)
