"""The plan's runners: the same inner loop, run locally or scheduled by a coordinator."""
import json
import math
import os
import subprocess
import sys
import types

import pytest
import tensorflow as tf

from helpers import testing_utils
from core.errors import ClusterTaskFailed
from deployment import aggregation, runners
from deployment import plan as deployment_plan
from deployment.steps import ReplicaSteps

ROOT = testing_utils.TEST_DATA.parent.parent


def _batches(context=None):
    del context
    return tf.data.Dataset.range(100).batch(4)


def test_local_strategies_run_in_this_process():
    for strategy in (tf.distribute.get_strategy(),
                     tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])):
        plan = deployment_plan.for_strategy(strategy)
        steps = plan.inner_loop(model_step=None, input_fn=_batches)
        assert isinstance(steps, ReplicaSteps)
        assert isinstance(steps.runner, runners.LocalRunner)
        assert isinstance(steps.aggregator, aggregation.AllReduce)
        assert plan.agreement is None
        # Clones on one host all-reduce in memory: whole gradients.
        assert not plan.factors_weight_gradients


def _strategy_of(cluster):
    """A multi-worker strategy as far as leave_together looks: its cluster."""
    resolver = types.SimpleNamespace(cluster_spec=lambda: tf.train.ClusterSpec(cluster))
    return types.SimpleNamespace(cluster_resolver=resolver)


class _LeavingFails:
    def __init__(self, error):
        self.error = error

    def leave_together(self):
        raise self.error


@pytest.mark.parametrize('error, line', [
    (tf.errors.UnavailableError(None, None, 'failed to connect to ipv4:127.0.0.1:5001'),
     'worker task 1 (127.0.0.1:5001) stopped answering at the end of training; restart '
     'every worker'),
    (tf.errors.DeadlineExceededError(None, None, 'Barrier timed out'),
     'A worker did not finish its last call within 600 s of the others; restart every'),
])
def test_workers_that_do_not_meet_at_the_end_end_in_one_line(error, line):
    two_workers = _strategy_of({'worker': ['127.0.0.1:5000', '127.0.0.1:5001']})
    plan = deployment_plan.DeploymentPlan(strategy=two_workers,
                                          agreement=_LeavingFails(error))
    with pytest.raises(ClusterTaskFailed) as raised:
        plan.leave_together()
    assert str(raised.value).startswith(line)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_a_lone_multi_worker_strategy_has_no_one_to_wait_for():
    plan = deployment_plan.DeploymentPlan(strategy=_strategy_of({}), agreement=_LeavingFails(
        tf.errors.InternalError(None, None, 'no coordination service')))
    plan.leave_together()  # returns without the barrier


def test_sync_replicas_need_parameter_servers():
    with pytest.raises(ValueError, match='ParameterServerStrategy'):
        deployment_plan.for_strategy(tf.distribute.get_strategy(), replicas_to_aggregate=2)


def test_trainer_runs_through_the_coordinator_on_a_parameter_server_cluster(tmp_path):
    # 1 ps + 1 worker in a child process (it joins a cluster), bounded by the timeout.
    result = subprocess.run(
        [sys.executable, str(ROOT / 'tests' / 'helpers' /
                             'run_parameter_server_training.py'), str(tmp_path / 'train')],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
        text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary['runner'] == 'CoordinatorRunner'
    assert summary['global_step'] == 6
    assert summary['variable_devices'] == ['/job:ps/replica:0/task:0/device:CPU:0']
    assert summary['changed'] and math.isfinite(summary['loss'])
    assert summary['checkpoint'].endswith('model.ckpt-6')
