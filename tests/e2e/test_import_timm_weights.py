"""import_timm_weights.py as a user types it: timm's snapshot folder (the vit_tiny_16
golden, tests/data/timm) -> a checkpoint whose logits are timm's, with timm's
preprocessing and class names beside it; a config.json of another architecture ends in
one line."""
import json
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf
from absl import logging

from helpers.scripts import TRAIN, run_script
from nets import nets_factory
from preprocessing import preprocessing_factory, vit_preprocessing
from training.checkpoints import restore

IMPORT = 'import_timm_weights.py'
GOLDEN = pathlib.Path(__file__).resolve().parents[1] / 'data' / 'timm' / 'vit_tiny_16'


def _error_line(result):
    assert result.returncode == 1, result.stdout + result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith('ERROR:')]
    assert len(errors) == 1 and 'Traceback' not in result.stderr, result.stderr[-2000:]
    return errors[0]


def _restored_logits(prefix, images):
    network = nets_factory.get_network_fn('vit_tiny_16', 10)
    network(tf.zeros([1, *images.shape[1:]]), training=False)
    reader = tf.train.load_checkpoint(prefix)
    for variable in network.variables:
        variable.assign(reader.get_tensor(variable.name[:-2]))
    return network(tf.constant(images), training=False)[0].numpy()


@pytest.fixture(scope='module')
def imported(tmp_path_factory):
    """The golden imported through the script at 32x32 (its grid): (output, result)."""
    output = tmp_path_factory.mktemp('timm') / 'imported'
    made = run_script(IMPORT, '--model_name=vit_tiny_16', f'--timm_weights={GOLDEN}',
                      f'--output_dir={output}', '--image_size=32')
    assert made.returncode == 0, made.stderr[-3000:]
    return output, made


def test_import_gives_timms_logits_and_keeps_its_preprocessing(imported, tmp_path):
    output, made = imported
    assert ('Restore report: 152 of 152 timm tensors copied, each exactly once (50 '
            'transformed to our layout), none left over.') in made.stdout
    assert f'Wrote {output}/model.ckpt-0' in made.stdout
    assert '--checkpoint_exclude_scopes=vit_tiny_16/head/logits' in made.stdout
    record = json.loads((output / 'import.json').read_text())
    timm_config = json.loads((GOLDEN / 'config.json').read_text())
    assert record['pretrained_cfg'] == {
        key: timm_config['pretrained_cfg'][key] for key in
        ('mean', 'std', 'crop_pct', 'interpolation', 'input_size', 'crop_mode')}
    assert (record['num_classes'], record['label_names'], record['timm_architecture'],
            record['image_size'], record['resampled']) == (
        10, timm_config['label_names'], 'vit_tiny_patch16_224', 32, [])

    images, theirs = np.load(GOLDEN / 'input.npy'), np.load(GOLDEN / 'logits.npy')
    ours = _restored_logits(str(output / 'model.ckpt-0'), images)
    assert np.abs(ours - theirs).max() / np.abs(theirs).max() < 1e-4

    other = _error_line(run_script(IMPORT, '--model_name=vit_small_16',
                                   f'--timm_weights={GOLDEN}',
                                   f'--output_dir={tmp_path / "other"}'))
    assert other.endswith('holds timm\'s vit_tiny_patch16_224, not --model_name=vit_small_16 '
                          '(timm\'s vit_small_patch16_224, vit_small_patch16_384, '
                          'deit_small_patch16_224); pass the --model_name of its '
                          'architecture, or weights of vit_small_patch16_224.')


def test_restoring_at_another_size_resamples_the_position_embedding(imported, monkeypatch):
    """Fine-tuning, evaluation and export at 48 (a 3x3 grid) from the 2x2 checkpoint:
    the restore resamples and says so; the logits are the 32x32 net's called at 48."""
    output, _ = imported
    images = np.load(GOLDEN / 'input.npy')
    larger = tf.image.resize(images, [48, 48]).numpy()
    at_32 = nets_factory.get_network_fn('vit_tiny_16', 10)
    at_32(tf.zeros([1, 32, 32, 3]), training=False)
    restore.restore_network(at_32, str(output))
    at_48 = nets_factory.get_network_fn('vit_tiny_16', 10)
    at_48(tf.zeros([1, 48, 48, 3]), training=False)
    said = []
    monkeypatch.setattr(logging, 'info', lambda fmt, *args: said.append(fmt % args))
    restore.restore_network(at_48, str(output))
    assert said[0].endswith('151 restored, 0 excluded, 0 missing, 0 shape-mismatched, 0 '
                            'only in the checkpoint. vit_tiny_16/position_embedding '
                            'resampled from [1, 5, 192] to [1, 10, 192] (bicubic: this '
                            'image size\'s grid).'), said
    np.testing.assert_allclose(at_48(tf.constant(larger), training=False)[0],
                               at_32(tf.constant(larger), training=False)[0],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_linear_probe_fine_tunes_at_another_size(imported, tmp_path, shapes_dir):
    output, _ = imported
    tuned = run_script(TRAIN, '--model_name=vit_tiny_16', '--dataset_name=shapes',
                       f'--dataset_dir={shapes_dir}', f'--train_dir={tmp_path / "train"}',
                       f'--checkpoint_path={output}', '--train_image_size=48',
                       '--checkpoint_exclude_scopes=vit_tiny_16/head/logits',
                       '--trainable_scopes=vit_tiny_16/head/logits', '--batch_size=4',
                       '--max_number_of_steps=2')
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    assert ('149 restored, 2 excluded, 0 missing, 0 shape-mismatched, 0 only in the '
            'checkpoint. vit_tiny_16/position_embedding resampled from [1, 5, 192] to '
            '[1, 10, 192]') in tuned.stderr
    assert ('Preprocessing: vit with the imported pretrained_cfg: mean=(0.5, 0.5, 0.5), '
            'std=(0.5, 0.5, 0.5), crop_fraction=0.9, interpolation=bicubic.') in tuned.stderr
    carried = json.loads((tmp_path / 'train' / 'preprocessing.json').read_text())
    assert carried['pretrained_cfg'] == json.loads(
        (output / 'import.json').read_text())['pretrained_cfg']


@pytest.mark.slow
def test_the_export_serves_with_the_imported_preprocessing(imported, tmp_path):
    """An import.json saying DeiT's preprocessing (ImageNet's mean and std, crop_pct
    0.875): the export's serving_default applies it, not the vit family's own."""
    output, _ = imported
    deit_like = tmp_path / 'deit_like'
    shutil.copytree(output, deit_like)
    record = json.loads((deit_like / 'import.json').read_text())
    cfg = dict(mean=list(vit_preprocessing.IMAGENET_MEAN),
               std=list(vit_preprocessing.IMAGENET_STD), crop_pct=0.875)
    record['pretrained_cfg'].update(cfg)
    (deit_like / 'import.json').write_text(json.dumps(record))
    export = tmp_path / 'export'
    made = run_script('export_inference_graph.py', '--model_name=vit_tiny_16',
                      '--dataset_name=cifar10', f'--checkpoint_path={deit_like}',
                      f'--export_dir={export}', '--export_format=saved_model',
                      '--image_size=32', '--num_parity_examples=4')
    assert made.returncode == 0, made.stderr[-3000:]
    assert ("Preprocessing: vit with the imported pretrained_cfg: mean=(0.485, 0.456, "
            "0.406), std=(0.229, 0.224, 0.225), crop_fraction=0.875, "
            "interpolation=bicubic.") in made.stderr
    pixels = tf.constant(np.random.default_rng(3).integers(0, 256, (2, 45, 37, 3)),
                         tf.uint8)
    served = tf.saved_model.load(str(export / 'saved_model')).signatures[
        'serving_default'](images=pixels)['logits'].numpy()
    network = nets_factory.get_network_fn('vit_tiny_16', 10)
    network(tf.zeros([1, 32, 32, 3]), training=False)
    restore.restore_network(network, str(deit_like))
    preprocess = preprocessing_factory.get_preprocessing('vit')

    def logits(**options):
        images = tf.stack([preprocess(p, 32, 32, **options) for p in pixels])
        return network(images, training=False)[0].numpy()

    expected = logits(mean=cfg['mean'], std=cfg['std'], crop_fraction=0.875)
    assert np.abs(served - expected).max() / np.abs(expected).max() < 1e-4
    assert not np.allclose(served, logits(), rtol=1e-3)  # the family's own values differ
