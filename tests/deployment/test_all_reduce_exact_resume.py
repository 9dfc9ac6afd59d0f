"""Exact resume under multi-worker all-reduce: two workers train cifarnet on shapes with
--seed --deterministic; one worker is SIGKILLed after a checkpoint (and its workers'
input positions) and some more steps (or SIGTERMed: all stop and save at one step), the
whole cluster is restarted with the same flags, and the final variables are
bit-identical to an uninterrupted run's.

Each worker saves its own input position beside the chief's checkpoint
(deployment.input_positions); the restarted workers read on from it.
"""
import random
import re
import signal
import time

import pytest

from helpers import testing_utils
from helpers.cluster_processes import TRAIN, free_ports, lines_with_error, processes

MAX_STEPS = 150
# The test kills a worker within KILL_WITHIN_SECS of seeing both workers' positions of a
# checkpoint on disk: before the chief's next save, SAVE_INTERVAL_SECS after that one.
SAVE_INTERVAL_SECS = 2
KILL_WITHIN_SECS = (0.3, 1.0)
_SAVED = re.compile(r'Saved checkpoint .*model\.ckpt-(\d+)\.')


@pytest.fixture(scope='module')
def shapes_data(tmp_path_factory):
    directory = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(directory), num_train=48, num_validation=4)
    return directory


def _worker_command(data, train_dir, task, ports):
    hosts = ','.join(f'127.0.0.1:{port}' for port in ports)
    return [TRAIN, f'--worker_hosts={hosts}', '--job_name=worker', f'--task={task}',
            '--dataset_name=shapes', f'--dataset_dir={data}', '--model_name=cifarnet',
            '--train_image_size=32', f'--train_dir={train_dir}', '--batch_size=32',
            '--optimizer=sgd', '--seed=3', '--deterministic', '--shuffle_buffer_size=64',
            f'--max_number_of_steps={MAX_STEPS}', '--steps_per_loop=2',
            '--log_every_n_steps=2', f'--save_interval_secs={SAVE_INTERVAL_SECS}']


def _start_cluster(group, data, train_dir, suffix):
    ports = free_ports(2)
    for task in (1, 0):
        group.start(f'worker{task}{suffix}', _worker_command(data, train_dir, task, ports))


def _finish_cluster(group, suffix, timeout=300):
    for task in (0, 1):
        name = f'worker{task}{suffix}'
        assert group.wait(name, timeout=timeout) == 0, group.log(name)[-3000:]


def _position(train_dir, task, step):
    return (train_dir / 'input_positions' / f'worker-{task}-of-2'
            / f'position-{step}.index')


def _wait_for_both_positions(group, train_dir, timeout=300):
    """The step of the first checkpoint whose input positions both workers wrote."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        saved = [int(s) for s in _SAVED.findall(group.log('worker0_first'))]
        if saved and all(_position(train_dir, task, saved[-1]).exists()
                         for task in (0, 1)):
            return saved[-1]
        assert group.children['worker0_first'].poll() is None, (
            group.log('worker0_first')[-3000:])
        time.sleep(0.05)
    pytest.fail(f'no checkpoint with both positions within {timeout} s')


def _kill_after_a_checkpoint(group, train_dir, killed, rng):
    """Waits for a checkpoint with both workers' input positions, lets training go on a
    few steps (less than the save interval), then SIGKILLs worker `killed`; the other
    must stop in one line. Returns the checkpoint's step."""
    checkpoint = _wait_for_both_positions(group, train_dir)
    time.sleep(rng.uniform(*KILL_WITHIN_SECS))  # a few steps past the checkpoint
    group.kill(f'worker{killed}_first')
    group.children[f'worker{killed}_first'].wait(timeout=30)  # its train_dir lock freed
    survivor = f'worker{1 - killed}_first'
    assert group.wait(survivor, timeout=180) == 1, group.log(survivor)[-3000:]
    assert len(lines_with_error(group.log(survivor))) == 1, group.log(survivor)[-3000:]
    return checkpoint


def _stop_after_a_checkpoint(group, train_dir, stopped, rng):
    """As _kill_after_a_checkpoint, but a SIGTERM: both workers stop at one step, the
    chief saving it and each worker its position of it. Returns that step."""
    _wait_for_both_positions(group, train_dir)
    time.sleep(rng.uniform(*KILL_WITHIN_SECS))
    group.kill(f'worker{stopped}_first', signal.SIGTERM)
    for task in (0, 1):
        assert group.wait(f'worker{task}_first', timeout=120) == 0, (
            group.log(f'worker{task}_first')[-3000:])
    return [int(s) for s in _SAVED.findall(group.log('worker0_first'))][-1]


@pytest.fixture(scope='module')
def uninterrupted(tmp_path_factory, shapes_data):
    directory = tmp_path_factory.mktemp('uninterrupted')
    with processes(directory) as group:
        _start_cluster(group, shapes_data, directory / 'train', '')
        _finish_cluster(group, '')
    return testing_utils.trained_state(directory / 'train', MAX_STEPS)


@pytest.mark.slow
@pytest.mark.parametrize('interrupt,task', [(_kill_after_a_checkpoint, 1),
                                            (_kill_after_a_checkpoint, 0),
                                            (_stop_after_a_checkpoint, 1)],
                         ids=['other_worker_killed', 'chief_killed', 'other_worker_stopped'])
def test_an_interrupted_worker_then_a_restarted_cluster_ends_bit_identical(
        tmp_path, shapes_data, uninterrupted, interrupt, task):
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        _start_cluster(group, shapes_data, train_dir, '_first')
        checkpoint = interrupt(group, train_dir, task, random.Random(task))
        _start_cluster(group, shapes_data, train_dir, '_restarted')
        _finish_cluster(group, '_restarted')
        logs = [group.log(f'worker{task}_restarted') for task in (0, 1)]
    assert ('input position: saved with each checkpoint, each worker its own iterator\'s '
            '(<train_dir>/input_positions/)') in logs[0]
    # No newer checkpoint was written before the kill (a stop saves the step it stops
    # at): the restart resumed from it.
    assert re.search(rf'Resumed from .*model\.ckpt-{checkpoint} at step', logs[0]), logs[0]
    for task, log in enumerate(logs):
        assert (f'Worker {task} reads on from its input position of step {checkpoint}.'
                in log), log[-3000:]
        assert not lines_with_error(log), log[-3000:]
        # The last step's too (no agreement after it): raising the limit reads on.
        assert _position(train_dir, task, MAX_STEPS).exists()
    testing_utils.assert_bit_identical(uninterrupted,
                                       testing_utils.trained_state(train_dir, MAX_STEPS))
