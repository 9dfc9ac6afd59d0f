"""Divergence rollback in a cluster on 127.0.0.1, through the script, lenet on shapes with
bad batches planted by tests/helpers/run_training_with_nan.py.

Multi-worker all-reduce, two workers, the bad batch in worker 1's input only. A huge
batch at the end of a call puts worker 1's own loss far above --loss_upper_bound while
worker 0's stays fine: the workers' agreement makes both roll back at that call, to the
chief's checkpoint, and both finish.
NaN batches past --divergence_retries stop both in one line each.

Asynchronous parameter servers, 1 ps + 2 workers: the chief's input_fn gives each worker
a NaN batch; the chief rolls back after the call's closures have run, and finishes.
"""
import re

import numpy as np
import pytest
import tensorflow as tf

from helpers import testing_utils
from helpers.cluster_processes import (ROOT, TRAIN, free_ports, lines_with_error,
                                      processes)

HELPER = ROOT / 'tests' / 'helpers' / 'run_training_with_nan.py'
MAX_STEPS = 15
_ROLLBACK = re.compile(r'(.*) at step (\d+): rolled back to model\.ckpt-(\d+) '
                       r'\(rollback (\d) of (\d)\)')


@pytest.fixture(scope='module')
def shapes_data(tmp_path_factory):
    directory = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(directory), num_train=64, num_validation=4)
    return directory


def _start_workers(group, shapes_data, train_dir, worker1_bad_batches, *flags,
                   huge=False):
    ports = free_ports(2)
    hosts = ','.join(f'127.0.0.1:{port}' for port in ports)
    for task in (1, 0):
        # Calls end at steps 1, 3, 6, 9, ... with a save after each: a fresh worker
        # reads batch b at step b, so batch 9 is the last step of the call 7-9.
        group.start(f'worker{task}', [
            HELPER, f'--nan_batches={worker1_bad_batches if task == 1 else ""}',
            *(['--huge'] if huge else []),
            f'--worker_hosts={hosts}', '--job_name=worker', f'--task={task}',
            '--dataset_name=shapes', f'--dataset_dir={shapes_data}', '--model_name=lenet',
            f'--train_dir={train_dir}', '--batch_size=4', '--optimizer=sgd', '--seed=3',
            f'--max_number_of_steps={MAX_STEPS}', '--steps_per_loop=3',
            '--log_every_n_steps=3', '--save_interval_secs=0', *flags])


@pytest.mark.slow  # two TensorFlow processes on 2 cores
def test_one_workers_diverged_loss_rolls_both_back_at_the_same_call(tmp_path,
                                                                   shapes_data):
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        _start_workers(group, shapes_data, train_dir, '9', huge=True)
        for name in ('worker0', 'worker1'):
            assert group.wait(name, timeout=240) == 0, group.log(name)[-3000:]
        logs = {name: group.log(name) for name in ('worker0', 'worker1')}
    rollbacks = {name: [m.groups() for m in _ROLLBACK.finditer(log)]
                 for name, log in logs.items()}
    assert len(rollbacks['worker1']) == 1, logs['worker1'][-3000:]
    assert re.search(r'Loss became [\d.e+]+ \(above --loss_upper_bound=1e\+06\)$',
                     rollbacks['worker1'][0][0])
    assert rollbacks['worker1'][0][1:] == ('9', '6', '1', '3')
    assert [groups[1:] for groups in rollbacks['worker0']] == [('9', '6', '1', '3')]
    assert rollbacks['worker0'][0][0].endswith(
        'Loss became non-finite or too large on another worker'), logs['worker0'][-3000:]
    assert f'global step {MAX_STEPS}: loss' in logs['worker0']
    assert re.search(rf'Saved checkpoint .*model\.ckpt-{MAX_STEPS}\.', logs['worker0'])
    for log in logs.values():
        assert not lines_with_error(log), log[-3000:]


@pytest.mark.slow
def test_nan_past_the_retries_stops_both_workers_in_one_line(tmp_path, shapes_data):
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        _start_workers(group, shapes_data, train_dir, ','.join(map(str, range(9, 40))),
                       '--divergence_retries=1')
        for name in ('worker0', 'worker1'):
            assert group.wait(name, timeout=240) != 0, group.log(name)[-3000:]
        logs = {name: group.log(name) for name in ('worker0', 'worker1')}
    for log in logs.values():
        # The NaN reaches the weights, which every worker holds alike.
        errors = lines_with_error(log)
        assert len(errors) == 1 and errors[0].startswith('ERROR: '), log[-3000:]
        assert errors[0].endswith(
            ' by step 9 after 1 rollback(s) in a row (--divergence_retries=1); the last '
            f'good checkpoint is {train_dir}/model.ckpt-6; lower --learning_rate (or '
            'check the input data) and train again.'), log[-3000:]


@pytest.mark.slow
def test_async_parameter_servers_roll_back_and_finish(tmp_path, shapes_data):
    train_dir = tmp_path / 'train'
    ports = free_ports(3)
    hosts = [f'--ps_hosts=127.0.0.1:{ports[0]}',
             f'--worker_hosts=127.0.0.1:{ports[1]},127.0.0.1:{ports[2]}',
             '--wait_for_chief_secs=3']
    with processes(tmp_path) as group:
        group.start('ps0', [TRAIN, *hosts, '--job_name=ps', '--task=0'])
        group.start('worker1', [TRAIN, *hosts, '--job_name=worker', '--task=1'])
        # Each worker's 6th batch is NaN (steps run on whichever worker is free).
        group.start('chief', [
            HELPER, '--nan_batches=6', *hosts, '--job_name=worker', '--task=0',
            '--dataset_name=shapes', f'--dataset_dir={shapes_data}', '--model_name=lenet',
            f'--train_dir={train_dir}', '--batch_size=4', '--optimizer=sgd', '--seed=3',
            f'--max_number_of_steps={MAX_STEPS + 9}', '--steps_per_loop=3',
            '--log_every_n_steps=3', '--save_interval_secs=0'])
        assert group.wait('chief', timeout=240) == 0, group.log('chief')[-3000:]
        for name in ('ps0', 'worker1'):
            assert group.wait(name, timeout=180) == 0, group.log(name)[-2000:]
        chief_log = group.log('chief')
    rollbacks = [m.groups() for m in _ROLLBACK.finditer(chief_log)]
    assert 1 <= len(rollbacks) <= 2, chief_log[-3000:]
    assert f'global step {MAX_STEPS + 9}: loss' in chief_log
    assert not lines_with_error(chief_log), chief_log[-3000:]
    reader = tf.train.load_checkpoint(str(train_dir))
    assert reader.get_tensor('global_step/.ATTRIBUTES/VARIABLE_VALUE') == MAX_STEPS + 9
    for name in reader.get_variable_to_shape_map():
        if name.startswith('model/'):
            assert np.isfinite(reader.get_tensor(name)).all(), name
