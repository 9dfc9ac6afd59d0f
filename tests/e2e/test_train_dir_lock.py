"""One writer per train_dir, through train_image_classifier.py: of two trainings started
0.5 s apart exactly one trains, the other is refused in one line naming it; after a
SIGKILL a new training takes the lock over with one warning and resumes; the lock goes
on every other exit (done, stopped by SIGTERM, an error)."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import tensorflow as tf
from helpers import testing_utils
from training.checkpoints.lock import LOCK_FILE

ROOT = testing_utils.TEST_DATA.parent.parent
WAIT_SECS = 180  # every wait is bounded by this; a passing run takes seconds


def _command(data, train_dir, *flags):
    return [sys.executable, str(ROOT / 'train_image_classifier.py'), '--dataset_name=shapes',
            f'--dataset_dir={data}', '--model_name=lenet', f'--train_dir={train_dir}',
            '--batch_size=4', '--optimizer=sgd', '--seed=1', '--log_every_n_steps=10',
            '--save_interval_secs=1', *flags]


def _start(command, log_path):
    with open(log_path, 'w') as log:  # the child keeps its own descriptor
        return subprocess.Popen(command, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                                stdout=subprocess.DEVNULL, stderr=log, text=True)


def _run(command):
    return subprocess.run(command, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=WAIT_SECS)


def _wait_for(condition, what, process=None):
    deadline = time.monotonic() + WAIT_SECS
    while not condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(f'the process ended (status {process.returncode}) before '
                                 f'{what}')
        if time.monotonic() > deadline:
            if process is not None:
                process.kill()
            raise AssertionError(f'timed out waiting for {what}')
        time.sleep(0.1)


def _checkpoints_on_disk(train_dir):
    return {str(train_dir / name[:-len('.index')]) for name in os.listdir(train_dir)
            if re.fullmatch(r'model\.ckpt-\d+\.index', name)}


def _listed(train_dir):
    return set(tf.train.get_checkpoint_state(str(train_dir)).all_model_checkpoint_paths)


def test_one_training_per_train_dir_and_a_killed_ones_lock_is_taken_over(tmp_path):
    data, train_dir = tmp_path / 'data', tmp_path / 'train'
    testing_utils.write_small_shapes(str(data), num_train=32, num_validation=4)
    endless = _command(data, train_dir, '--max_number_of_steps=1000000')
    logs = [tmp_path / 'first.log', tmp_path / 'second.log']
    trainings = [_start(endless, logs[0])]
    time.sleep(0.5)
    trainings.append(_start(endless, logs[1]))
    try:
        _wait_for(lambda: any(t.poll() is not None for t in trainings), 'a refusal')
        refused = 0 if trainings[0].poll() is not None else 1
        holder = trainings[1 - refused]
        text = logs[refused].read_text()
        assert trainings[refused].returncode == 1, text[-3000:]
        errors = [line for line in text.splitlines() if line.startswith('ERROR:')]
        assert len(errors) == 1 and 'Traceback' not in text, text[-3000:]
        assert (f'ERROR: --train_dir={train_dir} is in use by another training: pid '
                f'{holder.pid} on {socket.gethostname()} since ') in errors[0]
        assert 'running: python ' in errors[0]
        assert 'train_image_classifier.py --dataset_name=shapes' in errors[0]
        assert 'Wait for it to finish, stop it, or pass another --train_dir' in errors[0]
        # The holder trains on, saving; then it is killed without a chance to clean up.
        _wait_for(lambda: 'Saved checkpoint' in logs[1 - refused].read_text(),
                  'a checkpoint of the holder', holder)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    finally:
        for training in trainings:
            if training.poll() is None:
                training.kill()
                training.wait(timeout=60)
    assert json.loads((train_dir / LOCK_FILE).read_text())['pid'] == holder.pid
    newest = max(int(prefix.rsplit('-', 1)[1]) for prefix in _checkpoints_on_disk(train_dir))

    taken_over = _run(_command(data, train_dir, f'--max_number_of_steps={newest + 20}'))
    assert taken_over.returncode == 0, taken_over.stderr[-3000:]
    assert 'Traceback' not in taken_over.stderr
    takeovers = [line for line in taken_over.stderr.splitlines() if 'Taking over' in line]
    assert len(takeovers) == 1 and takeovers[0].startswith('W'), taken_over.stderr[-3000:]
    assert (f'Taking over --train_dir={train_dir} from a training that is gone (its '
            f'process {holder.pid} no longer runs)') in takeovers[0]
    assert re.search(r'Resumed from \S+model\.ckpt-\d+ at step \d+', taken_over.stderr)
    assert tf.train.latest_checkpoint(str(train_dir)).endswith(f'model.ckpt-{newest + 20}')
    assert not (train_dir / LOCK_FILE).exists()  # released at the normal exit
    # Nothing lost or unlisted: each checkpoint on disk is listed (the oldest went by
    # --max_checkpoints_to_keep), and each listed one is there.
    assert _checkpoints_on_disk(train_dir) == _listed(train_dir)


def test_the_lock_goes_when_training_stops_on_sigterm_or_an_error(tmp_path):
    data, train_dir = tmp_path / 'data', tmp_path / 'train'
    testing_utils.write_small_shapes(str(data), num_train=32, num_validation=4)
    log = tmp_path / 'train.log'
    training = _start(_command(data, train_dir, '--max_number_of_steps=1000000'), log)
    try:
        _wait_for(lambda: 'global step 10:' in log.read_text(), 'training', training)
        assert (train_dir / LOCK_FILE).exists()
        training.send_signal(signal.SIGTERM)
        training.wait(timeout=60)
    finally:
        if training.poll() is None:
            training.kill()
            training.wait(timeout=60)
    assert training.returncode == 0, log.read_text()[-3000:]
    assert not (train_dir / LOCK_FILE).exists()

    # Another optimizer than the checkpoint's: refused after the lock was taken.
    mismatch = _run(_command(data, train_dir, '--optimizer=adam',
                             '--max_number_of_steps=1000000'))
    assert mismatch.returncode == 1 and 'trained with another optimizer' in mismatch.stderr
    assert 'pass --optimizer=sgd' in mismatch.stderr  # the one it was trained with
    assert not (train_dir / LOCK_FILE).exists()
