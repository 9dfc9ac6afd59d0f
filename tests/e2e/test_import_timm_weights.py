"""import_timm_weights.py as a user types it: timm's snapshot folder (the vit_tiny_16
golden, tests/data/timm) -> a checkpoint whose logits are timm's, with timm's
preprocessing and class names beside it; a config.json of another architecture ends in
one line."""
import json
import pathlib

import numpy as np
import tensorflow as tf

from helpers.scripts import run_script
from nets import nets_factory

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


def test_import_gives_timms_logits_and_keeps_its_preprocessing(tmp_path):
    output = tmp_path / 'imported'
    made = run_script(IMPORT, '--model_name=vit_tiny_16', f'--timm_weights={GOLDEN}',
                      f'--output_dir={output}', '--image_size=32')
    assert made.returncode == 0, made.stderr[-3000:]
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
