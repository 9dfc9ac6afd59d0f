"""The Device performance flags -> the jobs' DeploymentConfig (all-reduce, prefetch) and
ThreadConfig, in both scripts that take them; defaults are TensorFlow's."""
import pytest
from absl import flags

from cli import configs
from cli import flags as cli_flags
from core.errors import UsageError
from core.threads import ThreadConfig
from deployment.collectives import AllReduceConfig
from deployment.device_input import DevicePrefetch

TRAIN, EVAL = cli_flags.SCRIPTS[:2]
SETTINGS = ['--noprefetch_to_device', '--per_replica_buffer_size=2',
            '--inter_op_threads=2', '--intra_op_threads=3', '--gpu_thread_mode=gpu_private',
            '--gpu_thread_count=1']


def test_training_flags_reach_the_deployment_and_the_threads(parsed):
    job = configs.training_from_flags(parsed(TRAIN, '--strategy=multi_worker',
                                             '--all_reduce_alg=ring',
                                             '--all_reduce_bytes_per_pack=4096',
                                             '--noall_reduce_weight_factors', *SETTINGS))
    assert job.deployment.all_reduce == AllReduceConfig('ring', num_packs=1,
                                                        bytes_per_pack=4096,
                                                        weight_factors=False)
    assert job.deployment.all_reduce.describe() == ('ring, packs of 4096 bytes, no weight '
                                                    'factors')
    assert job.deployment.prefetch == DevicePrefetch(to_device=False, buffer_size=2)
    assert job.threads == ThreadConfig(2, 3, 'gpu_private', 1)


def test_evaluation_flags_reach_the_deployment_and_the_threads(parsed):
    job = configs.evaluation_from_flags(parsed(EVAL, '--num_clones=2',
                                               '--all_reduce_alg=nccl', '--num_packs=2',
                                               *SETTINGS))
    assert job.deployment.all_reduce == AllReduceConfig('nccl', num_packs=2)
    assert job.deployment.prefetch == DevicePrefetch(to_device=False, buffer_size=2)
    assert job.threads == ThreadConfig(2, 3, 'gpu_private', 1)


@pytest.mark.parametrize('script, make_job', [(TRAIN, configs.training_from_flags),
                                              (EVAL, configs.evaluation_from_flags)])
def test_the_defaults_are_tensorflows_choices(script, make_job, parsed):
    job = make_job(parsed(script))
    assert job.deployment.all_reduce == AllReduceConfig()
    assert job.deployment.prefetch == DevicePrefetch()
    assert job.threads == ThreadConfig()


@pytest.mark.parametrize('hosts, expected', [
    ('--worker_hosts=127.0.0.1:2222,127.0.0.1:2223', ThreadConfig(1, 1, tasks_sharing_host=2)),
    ('--worker_hosts=10.0.0.1:2222,10.0.0.2:2222', ThreadConfig()),
])
def test_all_reduce_workers_on_one_host_split_its_cores(hosts, expected, parsed,
                                                        monkeypatch):
    monkeypatch.setattr('os.cpu_count', lambda: 2)
    job = configs.training_from_flags(parsed(TRAIN, hosts, '--job_name=worker', '--task=1'))
    assert job.threads == expected


def test_a_parameter_server_cluster_keeps_tensorflows_threads(parsed, monkeypatch):
    monkeypatch.setattr('os.cpu_count', lambda: 2)
    job = configs.training_from_flags(parsed(
        TRAIN, '--ps_hosts=127.0.0.1:2221', '--worker_hosts=127.0.0.1:2222,127.0.0.1:2223',
        '--job_name=worker', '--task=1'))
    assert job.threads == ThreadConfig()


@pytest.mark.parametrize('args, message', [
    (['--all_reduce_alg=ring'], 'one device has nothing to all-reduce'),
    (['--all_reduce_alg=NCCL'], 'Unknown --all_reduce_alg=NCCL'),
    (['--num_clones=2', '--clone_on_cpu', '--all_reduce_alg=hierarchical_copy'],
     'runs on GPUs, not with --clone_on_cpu'),
    (['--gpu_thread_count=2'], 'add --gpu_thread_mode=gpu_private or gpu_shared'),
    (['--per_replica_buffer_size=-1'], '--per_replica_buffer_size must be at least 0'),
])
def test_misuse_is_refused_when_the_flags_become_configs(args, message, parsed):
    with pytest.raises(UsageError, match=message):
        configs.evaluation_from_flags(parsed(EVAL, *args))


def test_an_unknown_gpu_thread_mode_is_refused_by_the_parser(parsed):
    with pytest.raises(flags.IllegalFlagValueError, match='gpu_private'):
        parsed(TRAIN, '--gpu_thread_mode=private')
