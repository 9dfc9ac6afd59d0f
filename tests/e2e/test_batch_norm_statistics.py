"""Batch-norm statistics through the scripts: the immature-statistics warning in the
README tour's situation (and not after a converged run), and
--recompute_batch_norm_statistics on a checkpoint trained 400 steps at TF-Slim's decay."""
import json

import numpy as np
import pytest
from helpers import docs_blocks
from helpers.scripts import EVAL, EXPORT, TRAIN, run_script

WARNING = 'Batch-norm moving statistics are immature'
SIZE = 64  # small images keep mobilenet_v1's steps cheap


@pytest.fixture(scope='module')
def photos(tmp_path_factory):
    """The docs test's photos (three classes separable by colour), converted."""
    directory = tmp_path_factory.mktemp('photos')
    docs_blocks.write_photos(directory)
    result = run_script('download_and_convert_data.py', '--dataset_name=image_folder',
                        f'--source_dir={directory / "my_photos"}',
                        f'--dataset_dir={directory / "data"}')
    assert result.returncode == 0, result.stderr
    return directory / 'data'


def _data(photos):
    return ['--dataset_name=image_folder', f'--dataset_dir={photos}',
            '--model_name=mobilenet_v1']


def _train(photos, train_dir, steps, *flags):
    result = run_script(TRAIN, *_data(photos), f'--train_dir={train_dir}',
                        f'--max_number_of_steps={steps}', f'--train_image_size={SIZE}',
                        '--batch_size=16', *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _evaluate(photos, checkpoint, eval_dir, *flags):
    result = run_script(EVAL, *_data(photos), '--dataset_split_name=validation',
                        f'--checkpoint_path={checkpoint}', f'--eval_dir={eval_dir}',
                        f'--eval_image_size={SIZE}', *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, json.loads((eval_dir / 'metrics.json').read_text())


@pytest.mark.slow  # the fast suite runs docs/training.md's batch-norm block (same scripts)
def test_the_warning_comes_for_immature_statistics_only(photos, tmp_path):
    immature = _train(photos, tmp_path / 'tour', 3)
    assert WARNING in immature.stderr and '--recompute_batch_norm_statistics' in immature.stderr
    assert 'batch norm:   decay 0.9997, epsilon 0.001 (the family\'s default)' in (
        immature.stderr)
    evaluated, _ = _evaluate(photos, tmp_path / 'tour', tmp_path / 'tour_eval')
    assert WARNING in evaluated.stderr
    exported = run_script(EXPORT, *_data(photos), f'--checkpoint_path={tmp_path / "tour"}',
                          f'--export_dir={tmp_path / "export"}', f'--image_size={SIZE}',
                          '--export_format=saved_model')
    assert exported.returncode == 0 and WARNING in exported.stderr, exported.stderr[-3000:]
    # The standalone step: a copy with recomputed statistics, which evaluates unwarned.
    recomputed = run_script('recompute_batch_norm_statistics.py', *_data(photos),
                            f'--checkpoint_path={tmp_path / "tour"}', f'--image_size={SIZE}',
                            '--recompute_batch_norm_statistics=2', '--batch_size=8')
    assert recomputed.returncode == 0, recomputed.stderr[-3000:]
    copy = tmp_path / 'tour' / 'batch_norm_statistics'
    assert (copy / 'model.ckpt-3.index').exists()
    evaluated, _ = _evaluate(photos, copy, tmp_path / 'copy_eval')
    assert WARNING not in evaluated.stderr
    converged = _train(photos, tmp_path / 'converged', 6, '--batch_norm_decay=0.3')
    assert WARNING not in converged.stderr
    assert 'batch norm:   decay 0.3, epsilon 0.001 (given)' in converged.stderr
    evaluated, _ = _evaluate(photos, tmp_path / 'converged', tmp_path / 'converged_eval')
    assert WARNING not in evaluated.stderr


@pytest.mark.slow
def test_recomputed_statistics_reach_the_batch_statistics_accuracy(photos, tmp_path):
    """400 steps at decay 0.9997: the moving statistics are 89 % their initial values.
    Evaluated with statistics recomputed over 20 batches, the net scores what it scores
    normalising each validation batch with its own moments (within 1/18, one image)."""
    import tensorflow as tf
    from nets import nets_factory
    from training.checkpoints import restore
    train_dir = tmp_path / 'train'
    _train(photos, train_dir, 400)
    _, as_trained = _evaluate(photos, train_dir, tmp_path / 'eval')
    result, recomputed = _evaluate(photos, train_dir, tmp_path / 'eval_recomputed',
                                   '--recompute_batch_norm_statistics=20')
    assert WARNING not in result.stderr
    # The same net with batch statistics, on the same preprocessed validation images.
    from cli.assembly import DataConfig, assemble_data
    data = DataConfig('image_folder', 'validation', str(photos), 'mobilenet_v1', 100,
                      image_size=SIZE)
    assembly = assemble_data(data, is_training=False)
    network = nets_factory.get_network_fn('mobilenet_v1', assembly.num_classes)
    network.build(assembly.image_shape)
    restore.restore_network(network, str(train_dir))
    images, labels = next(iter(assembly.input_fn(None)))[:2]
    logits, _ = network(images, training=True)
    batch_statistics = float(np.mean(tf.argmax(logits, -1).numpy() == labels.numpy()))
    assert batch_statistics >= 0.9
    assert recomputed['Accuracy'] >= batch_statistics - 1 / 18
    assert as_trained['Accuracy'] < 0.5  # what the fix is for
