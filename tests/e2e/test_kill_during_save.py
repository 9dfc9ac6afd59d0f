"""A training process killed (SIGKILL) in the middle of writing a checkpoint: the restart
removes the half-written save and resumes from the last complete checkpoint."""
import os
import subprocess
import sys

import tensorflow as tf
from helpers import testing_utils

ROOT = testing_utils.TEST_DATA.parent.parent

# Runs the training script, SIGKILLing itself inside its second save: after the shards
# are written to '<prefix>_temp/', before they are merged into the checkpoint.
_KILLED_IN_SECOND_SAVE = '''
import os, runpy, signal, sys
from tensorflow.python.checkpoint import functional_saver
merge = functional_saver.gen_io_ops.merge_v2_checkpoints
saves = []
def merge_then_die(*args, **kwargs):
    saves.append(1)
    if len(saves) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return merge(*args, **kwargs)
functional_saver.gen_io_ops.merge_v2_checkpoints = merge_then_die
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name='__main__')
'''


def test_sigkill_during_a_save_then_restart(tmp_path):
    data, train_dir = tmp_path / 'data', tmp_path / 'train'
    testing_utils.write_small_shapes(str(data), num_train=16, num_validation=4)
    args = [str(ROOT / 'train_image_classifier.py'), '--dataset_name=shapes',
            f'--dataset_dir={data}', '--model_name=lenet', f'--train_dir={train_dir}',
            '--batch_size=4', '--optimizer=sgd', '--log_every_n_steps=2',
            '--save_interval_secs=0', '--max_number_of_steps=6']
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    killed = subprocess.run([sys.executable, '-c', _KILLED_IN_SECOND_SAVE, *args], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert any(name.endswith('_temp') for name in os.listdir(train_dir))
    complete = tf.train.latest_checkpoint(str(train_dir))  # the first save's
    step = int(complete.rsplit('-', 1)[1])
    assert 0 < step < 6 and not os.path.exists(f'{complete}_temp')

    restarted = subprocess.run([sys.executable, *args], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=300)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert f'Resumed from {complete} at step {step}' in restarted.stderr
    assert not [name for name in os.listdir(train_dir) if '_temp' in name]
    assert tf.train.latest_checkpoint(str(train_dir)).endswith('model.ckpt-6')
