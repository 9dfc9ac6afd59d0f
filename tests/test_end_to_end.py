"""convert shapes -> train with 2 clones -> eval -> export -> reload, as a user would."""
import json

import numpy as np
import tensorflow as tf
from test_scripts import run_script

from datasets import dataset_factory
from training import checkpoints
from nets import nets_factory
from preprocessing import preprocessing_factory


def _check(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_convert_train_eval_export_reload(tmp_path):
    data, train, evals = tmp_path / 'data', tmp_path / 'train', tmp_path / 'eval'
    export, graph = tmp_path / 'export', tmp_path / 'graph.pb'
    _check(run_script('download_and_convert_data.py', '--dataset_name=shapes',
                      f'--dataset_dir={data}'))
    common = ['--dataset_name=shapes', f'--dataset_dir={data}', '--model_name=cifarnet']
    trained = _check(run_script(
        'train_image_classifier.py', *common, f'--train_dir={train}', '--num_clones=2',
        '--clone_on_cpu', '--batch_size=16', '--max_number_of_steps=12',
        '--log_every_n_steps=6', '--optimizer=sgd', '--learning_rate=0.05'))
    assert 'global step 12' in trained.stderr
    assert tf.train.latest_checkpoint(str(train)).endswith('model.ckpt-12')

    evaluated = _check(run_script(
        'eval_image_classifier.py', *common, '--dataset_split_name=validation',
        f'--checkpoint_path={train}', f'--eval_dir={evals}', '--batch_size=300'))
    metrics = json.loads((evals / 'metrics.json').read_text())
    assert metrics['num_examples'] == 1000 and metrics['global_step'] == 12
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
    checkpoints.restore_network(network, str(train))
    expected = network(images, training=False)[0].numpy()
    served = tf.saved_model.load(str(export)).signatures['serving_default'](images=images)
    np.testing.assert_allclose(served['logits'].numpy(), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(served['classes'].numpy(), expected.argmax(-1))
