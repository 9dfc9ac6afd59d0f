"""A run killed (SIGKILL) and resumed ends bit-identical to an uninterrupted one: the
checkpoint holds the input position and dropout's random state (one device, --seed,
--deterministic)."""
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import tensorflow as tf
from helpers import testing_utils

ROOT = testing_utils.TEST_DATA.parent.parent
MAX_STEPS = 60


def _command(data, train_dir):
    return [sys.executable, str(ROOT / 'train_image_classifier.py'), '--dataset_name=shapes',
            f'--dataset_dir={data}', '--model_name=lenet', '--train_image_size=28',
            f'--train_dir={train_dir}', '--batch_size=8', '--optimizer=momentum',
            '--seed=3', '--deterministic', '--shuffle_buffer_size=64',
            f'--max_number_of_steps={MAX_STEPS}', '--log_every_n_steps=5',
            '--steps_per_loop=5', '--save_interval_secs=0']


def _weights(train_dir):
    reader = tf.train.load_checkpoint(str(train_dir))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith(('model/', 'optimizer/')) and 'OPTIMIZER_SLOT' not in name}


def test_killed_and_resumed_run_ends_bit_identical_to_an_uninterrupted_one(tmp_path):
    data = tmp_path / 'data'
    testing_utils.write_small_shapes(str(data), num_train=48, num_validation=4)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # The uninterrupted run goes on beside the interrupted one (2 cores).
    reference = subprocess.Popen(_command(data, tmp_path / 'reference'), cwd=ROOT, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    killed = subprocess.Popen(_command(data, tmp_path / 'resumed'), cwd=ROOT, env=env,
                              stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in killed.stderr], daemon=True).start()
    deadline, seen = time.time() + 120, []
    while not any('Saved checkpoint' in line and 'model.ckpt-10.' in line for line in seen):
        try:
            seen.append(lines.get(timeout=max(0.0, deadline - time.time())))
        except queue.Empty:
            killed.kill()
            reference.kill()
            raise AssertionError('no checkpoint at step 10 within 120 s: '
                                 + ''.join(seen)[-2000:])
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    interrupted_at = tf.train.latest_checkpoint(str(tmp_path / 'resumed'))
    assert not interrupted_at.endswith(f'-{MAX_STEPS}'), 'killed too late to test a resume'
    resumed = subprocess.run(_command(data, tmp_path / 'resumed'), cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert 'Resumed from' in resumed.stderr
    _, reference_log = reference.communicate(timeout=300)
    assert reference.returncode == 0, reference_log[-3000:]
    expected, actual = _weights(tmp_path / 'reference'), _weights(tmp_path / 'resumed')
    assert tf.train.latest_checkpoint(str(tmp_path / 'resumed')).endswith(f'-{MAX_STEPS}')
    assert expected.keys() == actual.keys() and len(expected) >= 8
    for name, value in expected.items():
        np.testing.assert_array_equal(actual[name], value, err_msg=name)
