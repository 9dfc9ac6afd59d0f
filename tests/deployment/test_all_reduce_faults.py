"""Multi-worker all-reduce of a batch-norm net through the script at default flags, and
what each failure does: two real workers on 127.0.0.1, as docs/distributed.md starts
them on two machines.

Batch norm's moving statistics are per-replica (ON_READ) variables: a checkpoint saved
by the chief alone must not need the other worker (it used to wait on an all-reduce
only the chief ran).
"""
import json
import re
import signal

import pytest

from helpers import testing_utils
from helpers.cluster_processes import (EVAL, TRAIN, free_ports, killed_task_log,
                                      lines_with_error, processes)

# A batch-norm net small enough for 2 cores: mobilenet_v1 at 64x64 (a 2x2 final map).
BATCH_NORM_NET = ('--model_name=mobilenet_v1', '--train_image_size=64')


@pytest.fixture(scope='module')
def shapes_data(tmp_path_factory):
    directory = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(directory), num_train=64, num_validation=16)
    return directory


def worker_command(shapes_data, train_dir, task, ports, *flags):
    hosts = ','.join(f'127.0.0.1:{port}' for port in ports)
    return [TRAIN, f'--worker_hosts={hosts}', '--job_name=worker', f'--task={task}',
            '--dataset_name=shapes', f'--dataset_dir={shapes_data}', *BATCH_NORM_NET,
            f'--train_dir={train_dir}', *flags]


def start_workers(group, shapes_data, train_dir, *flags, suffix=''):
    ports = free_ports(2)
    for task in (1, 0):
        group.start(f'worker{task}{suffix}',
                    worker_command(shapes_data, train_dir, task, ports, *flags))
    return ports


def saved_steps(log):
    return [int(step) for step in re.findall(r'Saved checkpoint .*model\.ckpt-(\d+)\.', log)]


@pytest.mark.slow  # 22 s; tests/deployment/test_distributed_training.py runs cifarnet in make test
def test_a_batch_norm_net_trains_saves_and_its_checkpoint_evaluates(tmp_path, shapes_data):
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        start_workers(group, shapes_data, train_dir, '--max_number_of_steps=20')
        for name in ('worker0', 'worker1'):
            assert group.wait(name, timeout=180) == 0, group.log(name)[-3000:]
        chief_log = group.log('worker0')
        group.start('eval', [EVAL, '--dataset_name=shapes', f'--dataset_dir={shapes_data}',
                             '--dataset_split_name=validation', *BATCH_NORM_NET[:1],
                             '--eval_image_size=64', f'--checkpoint_path={train_dir}',
                             f'--eval_dir={tmp_path / "eval"}'])
        assert group.wait('eval', timeout=120) == 0, group.log('eval')[-3000:]
        eval_log = group.log('eval')
    assert 'strategy:     multi_worker' in chief_log
    assert 'global step 20: loss' in chief_log
    assert saved_steps(chief_log)[-1] == 20
    assert re.search(r'eval/Accuracy: [\d.]+', eval_log)
    assert json.loads((tmp_path / 'eval' / 'metrics.json').read_text())['global_step'] == 20


@pytest.mark.slow
def test_a_killed_worker_is_named_in_the_chiefs_one_line(tmp_path, shapes_data):
    with processes(tmp_path) as group:
        ports = start_workers(group, shapes_data, tmp_path / 'train',
                              '--max_number_of_steps=100000')
        group.wait_for_log('worker0', r'global step 20: loss', timeout=180)
        chief_log = killed_task_log(group, 'worker1', 'worker0')
    assert lines_with_error(chief_log) == [
        f'ERROR: worker task 1 (127.0.0.1:{ports[1]}) stopped answering, so training '
        'stopped; restart every worker with the same flags: training resumes from the '
        'last checkpoint in --train_dir.'], chief_log[-3000:]


@pytest.mark.slow
def test_a_sigterm_to_the_other_worker_stops_both_saved(tmp_path, shapes_data):
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        start_workers(group, shapes_data, train_dir, '--max_number_of_steps=100000')
        group.wait_for_log('worker0', r'global step 20: loss', timeout=180)
        group.kill('worker1', signal.SIGTERM)
        for name in ('worker0', 'worker1'):
            assert group.wait(name, timeout=60) == 0, group.log(name)[-3000:]
        chief_log = group.log('worker0')
    saved = saved_steps(chief_log)
    assert saved and saved[-1] >= 20, chief_log[-3000:]
    assert (train_dir / f'model.ckpt-{saved[-1]}.index').exists()
    assert not lines_with_error(chief_log)


@pytest.mark.slow
def test_a_killed_chief_restarted_with_its_worker_resumes_from_its_last_checkpoint(
        tmp_path, shapes_data):
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        ports = start_workers(group, shapes_data, train_dir, '--max_number_of_steps=100000',
                              '--save_interval_secs=1')
        group.wait_for_log('worker0', r'Saved checkpoint .*model\.ckpt-(\d*[1-9]\d)\.',
                           timeout=180)
        group.kill('worker0')
        group.children['worker0'].wait(timeout=30)
        # The other worker stops too, naming the chief.
        assert group.wait('worker1', timeout=120) == 1
        assert lines_with_error(group.log('worker1')) == [
            f'ERROR: worker task 0 (127.0.0.1:{ports[0]}) stopped answering, so training '
            'stopped; restart every worker with the same flags: training resumes from '
            'the last checkpoint in --train_dir.']
        latest = saved_steps(group.log('worker0'))[-1]
        target = latest + 10
        start_workers(group, shapes_data, train_dir, f'--max_number_of_steps={target}',
                      suffix='_restarted')
        for name in ('worker0_restarted', 'worker1_restarted'):
            assert group.wait(name, timeout=180) == 0, group.log(name)[-3000:]
        restarted = group.log('worker0_restarted')
    # A save may have ended after its last log line, before the kill.
    resumed = int(re.search(r'Resumed from .*model\.ckpt-(\d+) at step', restarted).group(1))
    assert latest <= resumed < target
    assert f'global step {target}: loss' in restarted
    assert saved_steps(restarted)[-1] == target
