"""A diverged loss is rolled back, through the script: lenet on shapes with NaN planted
in chosen input batches (tests/helpers/run_training_with_nan.py). One NaN batch: one
rollback line, training reaches --max_number_of_steps, rc 0, and the run is exact: under
--seed --deterministic it ends bit-identical to a run whose input leaves out the batches
the diverged call read (one device, 2 CPU clones). NaN batches in a row past
--divergence_retries: the one line of a diverged run, naming the rollbacks, no traceback.
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from helpers import testing_utils
from helpers.scripts import ROOT

HELPER = ROOT / 'tests' / 'helpers' / 'run_training_with_nan.py'
MAX_STEPS = 15
_ROLLBACK = re.compile(r'Loss became nan at step (\d+): rolled back to model\.ckpt-(\d+) '
                       r'\(rollback (\d) of (\d)\); reading on past the batches since\.')


@pytest.fixture(scope='module')
def shapes_dir(tmp_path_factory):
    data = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(data), num_train=48, num_validation=4)
    return data


def _train_with_nan(data, train_dir, nan_batches, *extra, skip=None):
    # A checkpoint after every call of 3 steps: batch 8 diverges the call of steps 7-9.
    command = [sys.executable, str(HELPER), f'--nan_batches={nan_batches}',
               *([f'--skip_batches={skip}'] if skip else []), '--dataset_name=shapes',
               f'--dataset_dir={data}', '--model_name=lenet',
               f'--train_dir={train_dir}', '--batch_size=4', '--optimizer=sgd', '--seed=3',
               f'--max_number_of_steps={MAX_STEPS}', '--steps_per_loop=3',
               '--save_interval_secs=0', '--log_every_n_steps=3', *extra]
    env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
    env['PYTHONPATH'] = str(ROOT)
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def _assert_rolled_back_once_exactly(tmp_path, data, nan_batch, read_by_the_call, *extra):
    """One rollback line, training finishes, and the final state equals the reference
    run's to the bit."""
    result = _train_with_nan(data, tmp_path / 'train', nan_batch, '--deterministic',
                             *extra)
    assert result.returncode == 0, result.stderr[-3000:]
    assert [match.groups() for match in _ROLLBACK.finditer(result.stderr)] == [
        ('9', '6', '1', '3')], result.stderr[-3000:]
    reference = _train_with_nan(data, tmp_path / 'reference', '', '--deterministic',
                                *extra, skip=read_by_the_call)
    assert reference.returncode == 0, reference.stderr[-3000:]
    expected, state = (testing_utils.trained_state(tmp_path / name, MAX_STEPS)
                       for name in ('reference', 'train'))
    assert all(np.isfinite(value).all() for value in state.values())
    testing_utils.assert_bit_identical(expected, state)


def test_one_nan_batch_is_rolled_back_once_exactly_and_training_finishes(tmp_path,
                                                                          shapes_dir):
    # The diverged call (steps 7-9) read batches 7-9.
    _assert_rolled_back_once_exactly(tmp_path, shapes_dir, '8', '7,8,9')


def test_nan_batches_past_the_retries_stop_in_one_line(tmp_path, shapes_dir):
    # Batches 8-30: the call of steps 7-9 and its rerun (batches 10-12) both diverge.
    result = _train_with_nan(shapes_dir, tmp_path / 'train',
                             ','.join(map(str, range(8, 31))), '--divergence_retries=1')
    assert result.returncode != 0
    assert 'Traceback' not in result.stderr, result.stderr[-3000:]
    assert len(_ROLLBACK.findall(result.stderr)) == 1, result.stderr[-3000:]
    assert result.stderr.rstrip().splitlines()[-1] == (
        'ERROR: Loss became nan by step 9 after 1 rollback(s) in a row '
        f'(--divergence_retries=1); the last good checkpoint is {tmp_path}/train/'
        'model.ckpt-6; lower --learning_rate (or check the input data) and train again.')


@pytest.mark.slow  # ~6 s; make test rolls back on one device
def test_two_clones_roll_back_once_exactly_and_finish(tmp_path, shapes_dir):
    # Each step reads a batch per clone: the diverged call (steps 7-9) read 13-18.
    _assert_rolled_back_once_exactly(tmp_path, shapes_dir, '15', '13,14,15,16,17,18',
                                     '--num_clones=2', '--clone_on_cpu')
