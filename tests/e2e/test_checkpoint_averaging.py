"""train -> average_checkpoints.py -> eval, as a user would: the averaged checkpoint
holds the exact mean of the last two and evaluates."""
import json

import numpy as np
import tensorflow as tf
from helpers.scripts import EVAL, TRAIN, run_script

AVERAGE = 'average_checkpoints.py'


def _check(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_the_last_two_checkpoints_averaged_evaluate(tmp_path, shapes_dir):
    train, averaged, evals = tmp_path / 'train', tmp_path / 'train' / 'averaged', tmp_path / 'eval'
    common = ['--dataset_name=shapes', f'--dataset_dir={shapes_dir}', '--model_name=cifarnet',
              '--moving_average_decay=0.9']
    # A checkpoint after every step: each call of the loop is one step (log line).
    _check(run_script(TRAIN, *common, f'--train_dir={train}', '--batch_size=8',
                      '--max_number_of_steps=3', '--save_interval_secs=0',
                      '--log_every_n_steps=1', '--shuffle_buffer_size=16'))
    made = _check(run_script(AVERAGE, f'--checkpoint_dir={train}', '--num_checkpoints=2',
                             f'--output_dir={averaged}'))
    assert f'Wrote {averaged}/model.ckpt-3;' in made.stdout

    second, third = (tf.train.load_checkpoint(str(train / f'model.ckpt-{step}'))
                     for step in (2, 3))
    result = tf.train.load_checkpoint(str(averaged / 'model.ckpt-3'))
    keys = result.get_variable_to_dtype_map()
    averaged_keys = [key for key, dtype in keys.items() if dtype == tf.float32
                     and key.startswith(('model/', 'ema/'))
                     and key.endswith('.ATTRIBUTES/VARIABLE_VALUE')]
    assert len(averaged_keys) == 20  # cifarnet's 10 variables and their moving averages
    for key in averaged_keys:
        mean = ((second.get_tensor(key).astype(np.float64) + third.get_tensor(key)) / 2)
        np.testing.assert_array_equal(result.get_tensor(key), mean.astype(np.float32))
    slots = [key for key in keys if key.startswith('optimizer/')
             and key.endswith('VARIABLE_VALUE')]
    assert slots and all(np.array_equal(result.get_tensor(k), third.get_tensor(k))
                         for k in slots)
    assert not any(key.startswith('input_position') for key in keys)

    evaluated = _check(run_script(
        EVAL, *common, '--dataset_split_name=validation', f'--checkpoint_path={averaged}',
        f'--eval_dir={evals}', '--batch_size=500'))
    metrics = json.loads((evals / 'metrics.json').read_text())
    assert metrics['checkpoint'] == str(averaged / 'model.ckpt-3')
    assert metrics['num_examples'] == 1000 and metrics['global_step'] == 3
    assert f'eval/Accuracy: {metrics["Accuracy"]:.4f}' in evaluated.stdout

    # Again into the same place: refused in one line, the average kept.
    again = run_script(AVERAGE, f'--checkpoint_dir={train}', f'--output_dir={averaged}')
    assert again.returncode == 1
    assert again.stderr.strip().splitlines()[-1] == (
        f'ERROR: {averaged}/model.ckpt-3.index exists already; pass --overwrite to replace '
        'it, or another --output_dir.')
