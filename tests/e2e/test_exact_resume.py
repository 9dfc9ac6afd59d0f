"""Runs are reproducible to the bit: two runs with the same --seed --deterministic end
with identical weights, and so does a run killed (SIGKILL) at random moments and
resumed each time. The checkpoint holds the input position and dropout's generator;
augmentation draws from stateless ops keyed by the seed and the example's number.

cifarnet (cifarnet preprocessing: crop, flip, colour; AdamW) on one device is in
`make test`; inception_v3 and vgg_16 (their preprocessing), and 2 CPU clones, are slow.
"""
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers import testing_utils
from helpers.scripts import ROOT, TRAIN

MAX_STEPS = 12
_SAVED = re.compile(r'Saved checkpoint .*model\.ckpt-(\d+)\.')


@pytest.fixture(scope='module')
def shapes_dir(tmp_path_factory):
    data = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(data), num_train=48, num_validation=4)
    return data


def _command(data, train_dir, model_name, image_size, extra=()):
    # A checkpoint every call of 3 steps: a kill lands before, during or after a save.
    return [sys.executable, str(ROOT / TRAIN), '--dataset_name=shapes',
            f'--dataset_dir={data}', f'--model_name={model_name}',
            f'--train_image_size={image_size}', f'--train_dir={train_dir}',
            '--batch_size=4', '--optimizer=sgd', '--seed=3', '--deterministic',
            '--shuffle_buffer_size=64', f'--max_number_of_steps={MAX_STEPS}',
            '--steps_per_loop=3', '--save_interval_secs=0', '--log_every_n_steps=3',
            *extra]


def _start(command, **kwargs):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def _kill_after_progress(command, rng, timeout=300):
    """Starts the run, waits until it saves a checkpoint, then SIGKILLs it after a
    random delay (0-2 s: during a step, a save, or after the end). Returns whether it
    had already finished (a kill after the final save leaves nothing to train: the
    next start says so and saves nothing)."""
    process = _start(command)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in process.stderr],
                     daemon=True).start()
    deadline, seen = time.time() + timeout, []
    while not any(_SAVED.search(line) for line in seen):
        if any('nothing to train' in line for line in seen):
            return process.wait(timeout=30) == 0
        try:
            seen.append(lines.get(timeout=max(0.0, deadline - time.time())))
        except queue.Empty:
            process.kill()
            raise AssertionError(f'no checkpoint within {timeout} s: '
                                 + ''.join(seen)[-2000:])
    time.sleep(rng.uniform(0.0, 2.0))
    process.send_signal(signal.SIGKILL)
    return process.wait(timeout=30) == 0


def _check_reproducible(tmp_path, data, model_name, image_size, extra=(), kills=3):
    """Two uninterrupted runs side by side, then one killed `kills` times and resumed:
    all three end bit-identical."""
    command = lambda name: _command(data, tmp_path / name, model_name, image_size,  # noqa: E731
                                    extra)
    first, second = _start(command('first')), _start(command('second'))
    for process in (first, second):
        _, log = process.communicate(timeout=600)
        assert process.returncode == 0, log[-3000:]
    rng = random.Random(f'{model_name}{extra}')
    for _ in range(kills):
        if _kill_after_progress(command('killed'), rng):
            break
    resumed = subprocess.run(command('killed'), cwd=ROOT, capture_output=True, text=True,
                             timeout=600, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert 'Traceback' not in resumed.stderr, resumed.stderr[-3000:]
    expected = testing_utils.trained_state(tmp_path / 'first', MAX_STEPS)
    for run in ('second', 'killed'):
        testing_utils.assert_bit_identical(
            expected, testing_utils.trained_state(tmp_path / run, MAX_STEPS))
    return resumed.stderr


def test_cifarnet_runs_and_a_killed_run_end_bit_identical(tmp_path, shapes_dir):
    # With AdamW: its slots and step count resume exactly; the plan says what it decays
    # and how the rate given for a batch of 2 scales to this run's 4 (sqrt: adaptive).
    log = _check_reproducible(tmp_path, shapes_dir, 'cifarnet', 32, kills=1,
                              extra=('--optimizer=adamw', '--learning_rate=0.001',
                                     '--learning_rate_base_batch_size=2'))
    assert ('weight decay: decoupled 0.004 x learning rate on 5 variables (5 excluded: '
            'biases); L2 --weight_decay=4e-05 in the loss') in log, log[-3000:]
    assert re.search(r"learning rate: 0\.00141421, exponential decay every \d+ steps \("
                     r"--learning_rate=0\.001 for a global batch of 2, x 1\.41421 \(sqrt\) "
                     r"for this run's 4\)", log), log[-3000:]


CLONES = ('--num_clones=2', '--clone_on_cpu')


@pytest.mark.slow
@pytest.mark.parametrize('model_name,image_size,extra', [
    ('cifarnet', 32, ()),
    ('cifarnet', 32, CLONES),
    ('inception_v3', 107, ()),   # the smallest input its auxiliary head takes
    ('inception_v3', 107, CLONES),
    ('vgg_16', 224, ()),         # its 7x7 fc6 needs 224
    ('vgg_16', 224, CLONES),
])
def test_runs_killed_three_times_end_bit_identical(tmp_path, shapes_dir, model_name,
                                                   image_size, extra):
    _check_reproducible(tmp_path, shapes_dir, model_name, image_size, extra, kills=3)
