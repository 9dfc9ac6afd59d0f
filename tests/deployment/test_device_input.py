"""--prefetch_to_device and --per_replica_buffer_size: the InputOptions the plan's
runner hands to the strategy's distribute_datasets_from_function."""
import pytest
import tensorflow as tf

from core.errors import UsageError
from deployment import model_deploy
from deployment import plan as deployment_plan
from deployment.device_input import DevicePrefetch


def test_the_defaults_are_tensorflows():
    assert DevicePrefetch().input_options == tf.distribute.InputOptions()
    options = DevicePrefetch(to_device=False, buffer_size=3).input_options
    assert (options.experimental_fetch_to_device,
            options.experimental_per_replica_buffer_size) == (False, 3)


def test_a_negative_buffer_is_refused():
    with pytest.raises(UsageError, match='--per_replica_buffer_size must be at least 0'):
        DevicePrefetch(buffer_size=-1)


def _batches(context):
    del context
    return tf.data.Dataset.range(8).batch(4)


def test_the_options_reach_distribute_datasets_from_function(monkeypatch):
    tf.constant(0)  # TensorFlow started, as in a script by now
    prefetch = DevicePrefetch(to_device=False, buffer_size=2)
    plan = deployment_plan.create(model_deploy.DeploymentConfig(strategy='multi_worker',
                                                                prefetch=prefetch))
    strategy, calls = plan.strategy, []
    distribute = strategy.distribute_datasets_from_function

    def recorded(input_fn, options=None):
        calls.append(options)
        return distribute(input_fn, options=options)

    monkeypatch.setattr(strategy, 'distribute_datasets_from_function', recorded)
    runner = plan.inner_loop(model_step=None, input_fn=_batches).runner
    assert calls == [prefetch.input_options]
    first = runner._iterator.get_next()  # pylint: disable=protected-access
    assert first.numpy().tolist() == [0, 1, 2, 3]
    assert 'device input: 2 batch(es) per replica prefetched to host memory' in (
        plan.describe(batch_size=4, train_dir='/t'))


def test_without_a_config_the_plan_has_the_default_one_whose_input_is_tensorflows(
        monkeypatch):
    strategy, calls = tf.distribute.get_strategy(), []
    monkeypatch.setattr(strategy, 'distribute_datasets_from_function',
                        lambda input_fn, options=None: calls.append(options) or
                        input_fn(tf.distribute.InputContext()))
    plan = deployment_plan.for_strategy(strategy)
    plan.inner_loop(model_step=None, input_fn=_batches)
    assert plan.config == model_deploy.DeploymentConfig()
    defaults = tf.distribute.InputOptions()
    assert calls[0].experimental_fetch_to_device is True  # TensorFlow's default behaviour
    assert (calls[0].experimental_per_replica_buffer_size
            == defaults.experimental_per_replica_buffer_size)
