"""A training process that is told to stop (SIGTERM, Ctrl-C) saves before it exits."""
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import tensorflow as tf
import testing_utils

ROOT = testing_utils.TEST_DATA.parent.parent


def test_sigterm_saves_a_checkpoint_at_the_step_reached(tmp_path):
    data = tmp_path / 'data'
    testing_utils.write_small_shapes(str(data), num_train=32, num_validation=4)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, str(ROOT / 'train_image_classifier.py'), '--dataset_name=shapes',
         f'--dataset_dir={data}', '--model_name=lenet', '--train_image_size=28',
         f'--train_dir={tmp_path / "train"}', '--batch_size=8', '--log_every_n_steps=5',
         '--optimizer=sgd', '--save_interval_secs=100000'],  # no periodic saves
        cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    # A reader thread, so waiting for the line has a hard deadline even if none comes.
    lines = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(l) for l in process.stderr],
                              daemon=True)
    reader.start()
    deadline, seen = time.time() + 120, []
    while not any('global step 10:' in line for line in seen):
        try:
            seen.append(lines.get(timeout=max(0.0, deadline - time.time())))
        except queue.Empty:
            process.kill()
            raise AssertionError('no "global step 10" within 120 s: ' + ''.join(seen)[-2000:])
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=120)
    reader.join(timeout=30)
    rest = ''.join(seen) + ''.join(lines.queue)
    assert process.returncode == 0, rest[-2000:]
    assert 'saving a checkpoint and stopping' in rest
    saved = tf.train.latest_checkpoint(str(tmp_path / 'train'))
    step = int(re.search(r'model\.ckpt-(\d+)$', saved).group(1))
    assert step >= 10 and step % 5 == 0  # stopped at a step boundary, after the signal
