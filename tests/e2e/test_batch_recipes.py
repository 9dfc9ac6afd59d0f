"""Mixup, cutmix and gradient accumulation through train_image_classifier.py: the run
trains, its plan says how an update is made, and its checkpoint counts updates."""
import tensorflow as tf
from helpers.scripts import TRAIN, run_script


def test_accumulated_mixed_training_counts_updates(shapes_dir, tmp_path):
    train_dir = tmp_path / 'train'
    result = run_script(TRAIN, '--dataset_name=shapes', f'--dataset_dir={shapes_dir}',
                        '--model_name=cifarnet', '--batch_size=4', '--seed=1',
                        '--gradient_accumulation_steps=2', '--mixup_alpha=0.2',
                        '--cutmix_alpha=1.0', '--max_number_of_steps=3',
                        '--log_every_n_steps=1', f'--train_dir={train_dir}')
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'accumulation: 2 micro-batches per update (8 examples per replica)' in (
        result.stderr)
    # An epoch of shapes' 5,000 training images is 5000 / (4 * 2) updates.
    assert '625 steps per epoch' in result.stderr
    reader = tf.train.load_checkpoint(str(train_dir))
    assert reader.get_tensor('global_step/.ATTRIBUTES/VARIABLE_VALUE') == 3


def test_accumulation_at_the_default_batch_runs_many_steps_per_call(shapes_dir, tmp_path):
    """Regression: at batch 128, with 10 steps per call of the compiled loop, Grappler's
    arithmetic optimizer made temporary variables that clashed across iterations
    (AlreadyExistsError); smaller batches or one step per call did not show it."""
    result = run_script(TRAIN, '--dataset_name=shapes', f'--dataset_dir={shapes_dir}',
                        '--model_name=cifarnet', '--batch_size=128',
                        '--gradient_accumulation_steps=2', '--max_number_of_steps=12',
                        f'--train_dir={tmp_path}')
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'global step 12:' in result.stderr
