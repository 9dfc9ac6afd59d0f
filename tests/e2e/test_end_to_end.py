"""train with 2 clones -> eval -> export -> reload, as a user would."""
import json
import re

import numpy as np
import pytest
import tensorflow as tf
from helpers.scripts import run_script

from datasets import dataset_factory
from training.checkpoints import restore
from nets import nets_factory
from preprocessing import preprocessing_factory

# Slow: the fast docs tests run the same flow (docs/export.md trains on two clones,
# evaluates and exports; the export checks its own parity), and test_scripts checks the
# silenced C++ log lines.
pytestmark = pytest.mark.slow


def _check(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_train_eval_export_reload(tmp_path, shapes_dir):
    # The converter script itself is tested in tests/datasets; this starts from its output.
    data, train, evals = shapes_dir, tmp_path / 'train', tmp_path / 'eval'
    export, graph = tmp_path / 'export', tmp_path / 'graph.pb'
    common = ['--dataset_name=shapes', f'--dataset_dir={data}', '--model_name=cifarnet']
    trained = _check(run_script(
        'train_image_classifier.py', *common, f'--train_dir={train}', '--num_clones=2',
        '--clone_on_cpu', '--batch_size=16', '--max_number_of_steps=12',
        '--log_every_n_steps=6', '--optimizer=sgd', '--learning_rate=0.05', '--seed=1'))
    assert 'global step 12' in trained.stderr
    # TensorFlow's C++ start-up and runtime log lines are silenced by default.
    assert not [line for line in trained.stderr.splitlines()
                if re.match(r'[IW]\d{4} [\d:.]+ +\d+ \S+\.cc:\d+\]', line)
                or 'absl::InitializeLog' in line], trained.stderr[-2000:]
    assert tf.train.latest_checkpoint(str(train)).endswith('model.ckpt-12')

    evaluated = _check(run_script(
        'eval_image_classifier.py', *common, '--dataset_split_name=validation',
        f'--checkpoint_path={train}', f'--eval_dir={evals}', '--batch_size=300'))
    metrics = json.loads((evals / 'metrics.json').read_text())
    assert metrics['num_examples'] == 1000 and metrics['global_step'] == 12
    assert metrics['checkpoint'] == str(train / 'model.ckpt-12')
    assert (metrics['model_name'], metrics['split_name']) == ('cifarnet', 'validation')
    assert f'eval/Accuracy: {metrics["Accuracy"]:.4f}' in evaluated.stdout

    _check(run_script('export_inference_graph.py', '--model_name=cifarnet',
                      '--dataset_name=shapes', f'--checkpoint_path={train}',
                      f'--saved_model_dir={export}', f'--output_file={graph}'))
    assert graph.stat().st_size > 1_000_000  # weights folded in

    # The export must compute what the trained model computes in process.
    spec = dataset_factory.get_dataset('shapes', 'validation', str(data))
    preprocess = preprocessing_factory.get_preprocessing('cifarnet')
    records = tf.data.TFRecordDataset(spec.list_files()).take(8)
    images = tf.stack([preprocess(spec.decode(r)[0], 32, 32) for r in records])
    network = nets_factory.get_network_fn('cifarnet', 10)
    network.build((32, 32, 3))
    restore.restore_network(network, str(train))
    expected = network(images, training=False)[0].numpy()
    served = tf.saved_model.load(str(export)).signatures['serving_preprocessed'](images=images)
    np.testing.assert_allclose(served['logits'].numpy(), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(served['classes'].numpy(), expected.argmax(-1))
