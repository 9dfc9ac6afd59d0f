"""mixed_bfloat16 training reaches float32's accuracy: cifarnet and lenet on the full
`shapes` set through the scripts, the same seed and recipe (the demo's) in both
precisions.

Measured (600 steps of batch 64, seeds 1 and 2), validation accuracy:
cifarnet (2026-11-24) float32 0.999 and 0.997, mixed_bfloat16 1.000 and 0.999;
lenet (2026-11-25) float32 0.989 and 0.988, mixed_bfloat16 0.985 and 0.991. The bound below leaves room for
other seeds and machines while a precision that broke training (chance is 0.1) fails.
"""
import json

import pytest

from helpers.scripts import run_script

pytestmark = pytest.mark.slow

RECIPE = ['--dataset_name=shapes', '--max_number_of_steps=600',
          '--batch_size=64', '--optimizer=adam', '--opt_epsilon=1e-8',
          '--learning_rate=0.001', '--learning_rate_decay_type=fixed',
          '--weight_decay=0.0004', '--seed=1', '--log_every_n_steps=100']
# Each precision's validation accuracy at least this, and within MAX_GAP of float32's.
MIN_ACCURACY, MAX_GAP = 0.95, 0.02


def _trained_accuracy(shapes_dir, tmp_path, model_name, precision):
    train_dir, eval_dir = tmp_path / precision, tmp_path / f'{precision}_eval'
    trained = run_script('train_image_classifier.py', *RECIPE, f'--model_name={model_name}',
                         f'--precision={precision}',
                         f'--dataset_dir={shapes_dir}', f'--train_dir={train_dir}',
                         timeout=600)
    assert trained.returncode == 0, trained.stderr[-3000:]
    evaluated = run_script('eval_image_classifier.py', f'--model_name={model_name}',
                           '--dataset_name=shapes', f'--dataset_dir={shapes_dir}',
                           '--dataset_split_name=validation',
                           f'--checkpoint_path={train_dir}', f'--eval_dir={eval_dir}')
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    return json.loads((eval_dir / 'metrics.json').read_text())['Accuracy']


@pytest.mark.parametrize('model_name', ['cifarnet', 'lenet'])
def test_mixed_bfloat16_training_reaches_float32_accuracy(shapes_dir, tmp_path, model_name):
    float32 = _trained_accuracy(shapes_dir, tmp_path, model_name, 'float32')
    bfloat16 = _trained_accuracy(shapes_dir, tmp_path, model_name, 'mixed_bfloat16')
    assert float32 >= MIN_ACCURACY and bfloat16 >= MIN_ACCURACY, (float32, bfloat16)
    assert abs(bfloat16 - float32) <= MAX_GAP, (float32, bfloat16)
