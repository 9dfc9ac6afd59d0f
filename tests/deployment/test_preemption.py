"""Preemption of a whole cluster (a node drain, a SLURM preemption, a double Ctrl-C): two
SIGTERMs 0.3 s apart to every task, mid-run. Every task exits 0 within
--preemption_grace_secs, the chief's final checkpoint is of the step reached, and the
cluster restarted resumes there. Real processes on 127.0.0.1, through the script."""
import re
import signal
import time

import pytest

from helpers import testing_utils
from helpers.cluster_processes import TRAIN, free_ports, lines_with_error, processes

GRACE_SECS = 30  # the default, Kubernetes' terminationGracePeriodSeconds


@pytest.fixture(scope='module')
def shapes_data(tmp_path_factory):
    directory = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(directory), num_train=64, num_validation=16)
    return directory


def _tasks(mode):
    """[(name, flags)] of every task, the chief first."""
    if mode in ('parameter_servers', 'sync_replicas'):  # 1 ps + 2 workers; worker 0 chief
        ps, *workers = free_ports(3)
        hosts = [f'--ps_hosts=127.0.0.1:{ps}',
                 f'--worker_hosts={",".join(f"127.0.0.1:{p}" for p in workers)}']
        sync = (['--sync_replicas', '--replicas_to_aggregate=2'] if mode == 'sync_replicas'
                else [])
        return [('chief', [*hosts, '--job_name=worker', '--task=0', *sync]),
                ('worker1', [*hosts, '--job_name=worker', '--task=1']),
                ('ps0', [*hosts, '--job_name=ps', '--task=0'])]
    ports = free_ports(2)  # multi-worker all-reduce
    hosts = f'--worker_hosts={",".join(f"127.0.0.1:{p}" for p in ports)}'
    return [('chief', [hosts, '--job_name=worker', '--task=0']),
            ('worker1', [hosts, '--job_name=worker', '--task=1'])]


def _start(group, tasks, training, suffix=''):
    for name, flags in reversed(tasks):  # servers first, the chief last
        group.start(name + suffix, [TRAIN, *flags, *training])


@pytest.mark.slow  # ~1 min each: two cluster starts on 2 cores
@pytest.mark.parametrize('mode', ['parameter_servers', 'sync_replicas', 'all_reduce'])
def test_sigterm_twice_to_every_task_saves_the_step_reached_and_all_exit_0(
        tmp_path, shapes_data, mode):
    train_dir = tmp_path / 'train'
    training = ['--dataset_name=shapes', f'--dataset_dir={shapes_data}',
                '--model_name=cifarnet', '--batch_size=4', f'--train_dir={train_dir}',
                '--log_every_n_steps=5', '--save_interval_secs=3600',
                '--wait_for_chief_secs=3']  # the rerun's servers leave soon after it
    tasks = _tasks(mode)
    with processes(tmp_path) as group:
        _start(group, tasks, [*training, '--max_number_of_steps=100000'])
        reached = int(group.wait_for_log('chief', r'global step (\d*[1-9]\d):',
                                         timeout=240).group(1))
        signalled = time.monotonic()
        for _ in range(2):
            for name, _ in tasks:
                group.kill(name, signal.SIGTERM)
            time.sleep(0.3)
        for name, _ in tasks:
            assert group.wait(name, timeout=GRACE_SECS + 30) == 0, group.log(name)[-3000:]
        took = time.monotonic() - signalled
        logs = {name: group.log(name) for name, _ in tasks}
        saved = [int(s) for s in re.findall(r'Saved checkpoint .*model\.ckpt-(\d+)\.',
                                            logs['chief'])]
        # One save, at the stop: the step reached when the signal came, or a call later.
        assert len(saved) == 1 and saved[0] >= reached, logs['chief'][-3000:]
        assert (train_dir / 'checkpoint').read_text().startswith(
            f'model_checkpoint_path: "model.ckpt-{saved[0]}"')

        _start(group, tasks, [*training, f'--max_number_of_steps={saved[0] + 5}'],
               suffix='_rerun')
        for name, _ in tasks:
            assert group.wait(name + '_rerun', timeout=240) == 0, \
                group.log(name + '_rerun')[-3000:]
        rerun = group.log('chief_rerun')
    assert took < GRACE_SECS, (took, logs)
    for name, log in logs.items():
        assert 'Signal 15 received' in log, (name, log[-2000:])
        assert 'outside the training loop' not in log, (name, log[-2000:])
        assert not lines_with_error(log), (name, lines_with_error(log))
    assert f'at step {saved[0]}.' in rerun and f'model.ckpt-{saved[0] + 5}' in rerun
