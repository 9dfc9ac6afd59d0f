"""Cluster resolution: flags, TF_CONFIG and SLURM give the same plan; bad specs are one
clear UsageError."""
import json
import socket

import pytest

from core.errors import UsageError
from deployment import cluster, model_deploy

PS = ('node1:8888', 'node2:8888')
WORKERS = ('node1:8889', 'node2:8889', 'node3:8888')


def _tf_config(task_type, index, with_chief=False):
    jobs = {'ps': list(PS), 'worker': list(WORKERS)}
    if with_chief:
        jobs = {'ps': list(PS), 'chief': [WORKERS[0]], 'worker': list(WORKERS[1:])}
    return {'TF_CONFIG': json.dumps({'cluster': jobs,
                                     'task': {'type': task_type, 'index': index}})}


def _slurm(rank):
    # 5 tasks: node1 and node2 run two each, node3 one; the first two are the ps tasks.
    # Block distribution: ranks 0,1 on node1; 2,3 on node2; 4 on node3.
    return {'SLURM_PROCID': str(rank), 'SLURM_NTASKS': '5',
            'SLURM_JOB_NODELIST': 'node[1-3]', 'SLURM_TASKS_PER_NODE': '2(x2),1'}


def _slurm_expected():
    # SLURM's ports count up per node, so its addresses differ from the hand-written
    # ones; the roles and counts are what must agree.
    return (('node1:8888', 'node1:8889'), ('node2:8888', 'node2:8889', 'node3:8888'))


@pytest.mark.parametrize('task_type,index', [('ps', 1), ('worker', 0), ('worker', 2)])
def test_flags_and_tf_config_resolve_to_the_same_cluster(task_type, index):
    from_flags = cluster.resolve(ps_hosts=','.join(PS), worker_hosts=','.join(WORKERS),
                                 job_name=task_type, task=index, environ={})
    from_env = cluster.resolve(environ=_tf_config(task_type, index))
    assert (from_flags.ps, from_flags.workers) == (PS, WORKERS)
    assert dataclasses_equal(from_flags, from_env)


def test_tf_config_chief_is_worker_zero():
    chief = cluster.resolve(environ=_tf_config('chief', 0, with_chief=True))
    second = cluster.resolve(environ=_tf_config('worker', 1, with_chief=True))
    assert chief.workers == WORKERS and chief.is_chief
    assert (second.task_type, second.task_index) == ('worker', 2)


@pytest.mark.parametrize('rank,expected', [(0, ('ps', 0)), (1, ('ps', 1)),
                                           (2, ('worker', 0)), (4, ('worker', 2))])
def test_slurm_tasks_become_ps_then_workers(rank, expected):
    resolved = cluster.resolve(num_ps_tasks=2, environ=_slurm(rank))
    assert (resolved.ps, resolved.workers) == _slurm_expected()
    assert (resolved.task_type, resolved.task_index) == expected
    assert resolved.source == 'SLURM'


def test_the_three_sources_give_the_same_plan():
    ps, workers = _slurm_expected()
    sources = [
        cluster.resolve(ps_hosts=','.join(ps), worker_hosts=','.join(workers),
                        job_name='worker', task=1, environ={}),
        cluster.resolve(environ={'TF_CONFIG': json.dumps(
            {'cluster': {'ps': ps, 'worker': workers},
             'task': {'type': 'worker', 'index': 1}})}),
        cluster.resolve(num_ps_tasks=2, environ=_slurm(3)),
    ]
    plans = [model_deploy.from_flags(cluster=c) for c in sources]
    for plan in plans:
        assert (plan.mode, plan.num_replicas, plan.num_ps_tasks, plan.replica_id,
                plan.is_chief, plan.serves_only) == (
            'parameter_server', 3, 2, 1, False, True)
        assert dataclasses_equal(plan.cluster, plans[0].cluster)
        assert plan.clone_device(0) == '/job:worker/device:CPU:0'
        assert [plan.variables_device(i) for i in range(3)] == [
            '/job:ps/task:0/device:CPU:0', '/job:ps/task:1/device:CPU:0',
            '/job:ps/task:0/device:CPU:0']


def dataclasses_equal(a, b):
    return (a.ps, a.workers, a.task_type, a.task_index) == (
        b.ps, b.workers, b.task_type, b.task_index)


def test_flags_win_over_tf_config_and_slurm():
    environ = {**_tf_config('ps', 0), **_slurm(0)}
    resolved = cluster.resolve(worker_hosts='localhost:1', environ=environ)
    assert resolved.source == 'the flags' and resolved.workers == ('localhost:1',)
    assert cluster.resolve(environ=environ).source == 'TF_CONFIG'


def test_no_cluster_outside_one():
    assert cluster.resolve(environ={}) is None
    assert cluster.resolve(environ={'SLURM_PROCID': '0', 'SLURM_NTASKS': '1'}) is None


def test_slurm_hostlists_expand():
    assert cluster.expand_hostlist('gpu[01-03,7],login,a[9-10]x') == (
        'gpu01', 'gpu02', 'gpu03', 'gpu7', 'login', 'a9x', 'a10x')


@pytest.mark.parametrize('kwargs,message', [
    (dict(ps_hosts='a:1', worker_hosts='b:1', job_name='worker', task=1),
     'Task 1 of job \'worker\' is out of range'),
    (dict(ps_hosts='a:1', worker_hosts='b:1', job_name='ps', task=3), 'use --task=0..0'),
    (dict(ps_hosts='a:1'), '--worker_hosts'),
    (dict(job_name='ps'), '--ps_hosts'),
    (dict(worker_hosts='b'), 'not host:port'),
    (dict(worker_hosts='b:1,b:1'), 'to more than one task'),
    (dict(worker_hosts='b:1', job_name='ps'), 'has no ps addresses'),
])
def test_bad_cluster_specs_are_one_line_usage_errors(kwargs, message):
    with pytest.raises(UsageError, match=message) as error:
        cluster.resolve(environ={}, **kwargs)
    assert '\n' not in str(error.value)


@pytest.mark.parametrize('environ,message', [
    ({'TF_CONFIG': '{not json'}, 'not a JSON object'),
    ({'TF_CONFIG': json.dumps({'cluster': {'worker': ['a:1'], 'master': ['b:1']}})},
     'master'),
    (_slurm(0) | {'SLURM_TASKS_PER_NODE': '1'}, 'one task per process'),
])
def test_bad_environments_are_usage_errors(environ, message):
    with pytest.raises(UsageError, match=message):
        cluster.resolve(environ=environ, num_ps_tasks=2)


def test_num_ps_tasks_without_ps_hosts_names_the_flag():
    with pytest.raises(UsageError, match='--num_ps_tasks=2 needs .*--ps_hosts'):
        model_deploy.from_flags(num_ps_tasks=2)
    resolved = cluster.resolve(worker_hosts='a:1,b:1', environ={})
    with pytest.raises(UsageError, match='--num_ps_tasks=2 but the cluster from the flags has 0 ps'):
        model_deploy.from_flags(num_ps_tasks=2, cluster=resolved)


def test_a_port_in_use_is_a_usage_error():
    with socket.socket() as holder:
        holder.bind(('', 0))
        holder.listen()
        port = holder.getsockname()[1]
        resolved = cluster.resolve(worker_hosts=f'localhost:{port}', environ={})
        with pytest.raises(UsageError, match=f'Port {port} of worker task 0 .* already '
                                             'in use'):
            cluster.check_port_free(resolved)


@pytest.mark.parametrize('workers, task, expected', [
    (('127.0.0.1:2222', '127.0.0.1:2223'), 1, 2),
    (('node1:2222', 'node1:2223', 'node2:2222'), 2, 1),
    (('node1:2222', 'node1:2223', 'node2:2222'), 0, 2),
])
def test_workers_on_this_host_count_by_the_host_part(workers, task, expected):
    resolved = cluster.from_flags(None, ','.join(workers), 'worker', task)
    assert resolved.workers_on_this_host() == expected
