"""A training process that is told to stop (SIGTERM, Ctrl-C) saves before it exits."""
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import tensorflow as tf
from helpers import testing_utils

ROOT = testing_utils.TEST_DATA.parent.parent


def _train_until(tmp_path, flags, marker, deadline_secs=120):
    """Starts lenet training on a few shapes examples; returns the process, its stderr
    lines up to the first containing marker, the queue of later ones and its reader."""
    data = tmp_path / 'data'
    testing_utils.write_small_shapes(str(data), num_train=32, num_validation=4)
    process = subprocess.Popen(
        [sys.executable, str(ROOT / 'train_image_classifier.py'), '--dataset_name=shapes',
         f'--dataset_dir={data}', '--model_name=lenet', '--train_image_size=28',
         f'--train_dir={tmp_path / "train"}', '--batch_size=8', '--optimizer=sgd', *flags],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stderr=subprocess.PIPE,
        text=True)
    # A reader thread, so waiting for the line has a hard deadline even if none comes.
    lines = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(l) for l in process.stderr],
                              daemon=True)
    reader.start()
    deadline, seen = time.time() + deadline_secs, []
    while not any(marker in line for line in seen):
        try:
            seen.append(lines.get(timeout=max(0.0, deadline - time.time())))
        except queue.Empty:
            process.kill()
            raise AssertionError(f'no {marker!r} within {deadline_secs} s: '
                                 + ''.join(seen)[-2000:])
    return process, seen, lines, reader


def test_sigterm_saves_a_checkpoint_at_the_step_reached(tmp_path):
    """Two SIGTERMs 0.3 s apart, as launchers and a double Ctrl-C send them: the second,
    during the running call, the final save or after it, is logged and ignored."""
    process, seen, lines, reader = _train_until(  # no periodic saves:
        tmp_path, ['--log_every_n_steps=5', '--save_interval_secs=100000'], 'global step 10:')
    process.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    process.wait(timeout=120)
    reader.join(timeout=30)
    rest = ''.join(seen) + ''.join(lines.queue)
    assert process.returncode == 0, rest[-2000:]
    assert 'saving a checkpoint and stopping' in rest
    assert 'outside the training loop' not in rest
    saved = tf.train.latest_checkpoint(str(tmp_path / 'train'))
    step = int(re.search(r'model\.ckpt-(\d+)$', saved).group(1))
    assert step >= 10 and step % 5 == 0  # stopped at a step boundary, after the signal


@pytest.mark.slow  # 6 s; tests/training/loop/test_controller.py caps calls in seconds
def test_sigterm_stops_within_seconds_even_between_distant_log_lines(tmp_path):
    """Calls of the compiled loop are capped in seconds, so a stop request is honoured
    quickly however many steps a log line (or --steps_per_loop) spans."""
    process, seen, lines, reader = _train_until(
        tmp_path, ['--log_every_n_steps=100000', '--steps_per_loop=100000',
                   '--save_interval_secs=1'],  # a 'Saved checkpoint' line shows it runs
        'Saved checkpoint')
    first_saved = int(re.search(r'model\.ckpt-(\d+)', seen[-1]).group(1))
    signalled = time.time()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError('still running 10 s after SIGTERM')
    assert time.time() - signalled < 10
    reader.join(timeout=30)
    rest = ''.join(seen) + ''.join(lines.queue)
    assert process.returncode == 0, rest[-2000:]
    saved = tf.train.latest_checkpoint(str(tmp_path / 'train'))
    step = int(re.search(r'model\.ckpt-(\d+)$', saved).group(1))
    assert step >= first_saved and f'Saved checkpoint {saved}.' in rest


def test_ctrl_c_during_start_up_exits_with_one_line(tmp_path):
    process = subprocess.Popen(
        [sys.executable, str(ROOT / 'train_image_classifier.py'), '--dataset_name=shapes',
         f'--dataset_dir={tmp_path}', f'--train_dir={tmp_path / "train"}'],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stderr=subprocess.PIPE,
        text=True)
    time.sleep(1.0)  # inside `import tensorflow` (it takes seconds)
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert process.returncode == 128 + signal.SIGINT, stderr[-2000:]
    assert 'Traceback' not in stderr and 'outside the training loop; nothing to save' in stderr
