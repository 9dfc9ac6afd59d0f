"""import_keras_weights.py as a user types it: a Keras file -> a checkpoint that
fine-tunes through the training script; mistakes and an offline `imagenet` end in one
line."""
import os

from helpers import keras_import_testing, offline
from helpers.scripts import TRAIN, run_script
from nets.keras_import import catalog

IMPORT = 'import_keras_weights.py'


def _error_line(result):
    assert result.returncode == 1, result.stdout + result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith('ERROR:')]
    assert len(errors) == 1 and 'Traceback' not in result.stderr, result.stderr[-2000:]
    return errors[0]


def test_import_then_fine_tune_and_the_mistakes(tmp_path, shapes_dir):
    weights = tmp_path / 'mobilenet_025.weights.h5'
    keras_import_testing.randomize_keras_weights(
        catalog.get('mobilenet_v1_025').build_keras(224)).save_weights(str(weights))
    output = tmp_path / 'imported'
    made = run_script(IMPORT, '--model_name=mobilenet_v1_025', f'--keras_weights={weights}',
                      f'--output_dir={output}')
    assert made.returncode == 0, made.stderr[-3000:]
    assert 'Restore report: 137 of 137 Keras tensors copied, each exactly once' in made.stdout
    assert f'Wrote {output}/model.ckpt-0' in made.stdout
    assert '--checkpoint_exclude_scopes=MobilenetV1/Logits' in made.stdout

    tuned = run_script(TRAIN, '--model_name=mobilenet_v1_025', '--dataset_name=shapes',
                       f'--dataset_dir={shapes_dir}', f'--train_dir={tmp_path / "train"}',
                       f'--checkpoint_path={output}', '--train_image_size=32',
                       '--checkpoint_exclude_scopes=MobilenetV1/Logits', '--batch_size=4',
                       '--max_number_of_steps=1')
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    assert ('135 restored, 2 excluded, 0 missing, 0 shape-mismatched, 0 only in the '
            'checkpoint') in tuned.stderr

    again = _error_line(run_script(IMPORT, '--model_name=mobilenet_v1_025',
                                   f'--keras_weights={weights}', f'--output_dir={output}'))
    assert 'is not empty; pass --overwrite' in again
    other = _error_line(run_script(IMPORT, '--model_name=mobilenet_v1_050',
                                   f'--keras_weights={weights}',
                                   f'--output_dir={tmp_path / "other"}'))
    assert 'another architecture' in other and 'conv1/kernel' in other
    unknown = _error_line(run_script(IMPORT, '--model_name=nasnet_mobile',
                                     '--keras_weights=imagenet', f'--output_dir={tmp_path}/n'))
    assert 'Keras weights import into: ' in unknown and ' inception_v3, ' in unknown


def test_imagenet_offline_names_the_file_and_where_it_goes(tmp_path, monkeypatch):
    monkeypatch.setenv('KERAS_HOME', str(tmp_path / 'keras_home'))
    with offline.refusing_proxy() as (url, asked):
        for name in ('http_proxy', 'https_proxy', 'HTTP_PROXY', 'HTTPS_PROXY'):
            monkeypatch.setenv(name, url)
        monkeypatch.delenv('no_proxy', raising=False)
        monkeypatch.delenv('NO_PROXY', raising=False)
        line = _error_line(run_script(IMPORT, '--model_name=mobilenet_v2',
                                      '--keras_weights=imagenet',
                                      f'--output_dir={tmp_path / "out"}'))
    file_name = 'mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.0_224.h5'
    assert f'put that file at {tmp_path}/keras_home/models/{file_name}' in line, line
    assert not os.path.exists(tmp_path / 'out')
