"""import.json's pretrained_cfg (import_timm_weights.py) as the preprocessing of
evaluation, export and fine-tuning from that checkpoint: the values the family takes,
none when --preprocessing_name is given or there is no import.json; the evaluation and
training configs carry them; a fine-tuning's train_dir holds them for its own
evaluation."""
import json

import numpy as np
import pytest
import tensorflow as tf

from cli import configs, imported_preprocessing
from cli.assembly import DataConfig
from preprocessing import preprocessing_factory

DEIT = {'mean': [0.485, 0.456, 0.406], 'std': [0.229, 0.224, 0.225], 'crop_pct': 0.875,
        'interpolation': 'bicubic', 'input_size': [3, 224, 224], 'crop_mode': 'center'}


@pytest.fixture
def imported_dir(tmp_path):
    (tmp_path / 'model.ckpt-0.index').write_bytes(b'')
    (tmp_path / 'import.json').write_text(json.dumps({'pretrained_cfg': DEIT}))
    return tmp_path


def test_the_values_the_family_takes(imported_dir):
    expected = (('mean', (0.485, 0.456, 0.406)), ('std', (0.229, 0.224, 0.225)),
                ('crop_fraction', 0.875), ('interpolation', 'bicubic'))
    assert imported_preprocessing.options(str(imported_dir), 'vit', named=False) == expected
    prefix = str(imported_dir / 'model.ckpt-0')
    assert imported_preprocessing.options(prefix, 'vit', named=False) == expected
    # ConvNeXt's family normalises as ImageNet always; it takes the crop only.
    assert imported_preprocessing.options(prefix, 'convnext', named=False) == (
        ('crop_fraction', 0.875),)


def test_none_when_named_or_without_an_import(imported_dir, tmp_path_factory):
    assert imported_preprocessing.options(str(imported_dir), 'vit', named=True) == ()
    assert imported_preprocessing.options(str(tmp_path_factory.mktemp('plain')), 'vit',
                                          named=False) == ()
    assert imported_preprocessing.options(None, 'vit', named=False) == ()


def test_applied_they_are_the_familys_keywords(imported_dir):
    """The options change the vit family's output exactly as its keywords do."""
    image = tf.cast(tf.random.stateless_uniform([40, 50, 3], [1, 2], maxval=255), tf.uint8)
    options = dict(imported_preprocessing.options(str(imported_dir), 'vit', named=False))
    preprocess = preprocessing_factory.get_preprocessing('vit')
    np.testing.assert_array_equal(
        preprocess(image, 32, 32, **options),
        preprocess(image, 32, 32, mean=DEIT['mean'], std=DEIT['std'], crop_fraction=0.875))
    assert DataConfig('flowers', 'validation', None, 'vit_tiny_16', 1,
                      preprocessing_options=tuple(options.items())).preprocessing_options


def test_the_evaluation_config_carries_them(imported_dir, parsed, tmp_path):
    evaluation = configs.evaluation_from_flags(parsed(
        'eval_image_classifier.py', '--model_name=vit_tiny_16',
        f'--checkpoint_path={imported_dir}', f'--eval_dir={tmp_path / "eval"}'))
    assert dict(evaluation.data.preprocessing_options)['crop_fraction'] == 0.875
    named = configs.evaluation_from_flags(parsed(
        'eval_image_classifier.py', '--model_name=vit_tiny_16', '--preprocessing_name=vit',
        f'--checkpoint_path={imported_dir}', f'--eval_dir={tmp_path / "eval"}'))
    assert named.data.preprocessing_options == ()


def test_training_takes_them_and_its_train_dir_keeps_them(imported_dir, parsed, tmp_path):
    training = configs.training_from_flags(parsed(
        'train_image_classifier.py', '--model_name=vit_tiny_16',
        f'--checkpoint_path={imported_dir}', f'--train_dir={tmp_path / "train"}'))
    assert dict(training.data.preprocessing_options)['mean'] == tuple(DEIT['mean'])
    train_dir = tmp_path / 'train'
    train_dir.mkdir()
    imported_preprocessing.carry(str(imported_dir), str(train_dir))
    assert imported_preprocessing.options(str(train_dir / 'model.ckpt-20'), 'vit',
                                          named=False) == imported_preprocessing.options(
        str(imported_dir), 'vit', named=False)
