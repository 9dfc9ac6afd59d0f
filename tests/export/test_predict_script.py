"""scripts/predict_saved_model.py: image files through 'serving_bytes' when the SavedModel
has it, else preprocessed by the script for 'serving_default'."""
import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils
from helpers.scripts import run_script

from datasets import shapes
from export import exporter
from preprocessing import preprocessing_factory


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    work = tmp_path_factory.mktemp('predict')
    net = testing_utils.built_cifarnet()
    preprocess_image = preprocessing_factory.get_preprocessing('cifarnet')
    preprocess = lambda image: preprocess_image(image, 32, 32)  # noqa: E731
    for name, with_bytes in [('bytes', True), ('plain', False)]:
        exporter.export_saved_model(net, str(work / name), exporter.ServingInfo(
            (32, 32, 3), class_names=shapes.INFO.labels_to_names(),
            preprocess=preprocess if with_bytes else None))
    images = np.random.default_rng(0).integers(0, 256, (2, 40, 48, 3), dtype=np.uint8)
    paths = [work / 'a.png', work / 'b.png']
    for path, image in zip(paths, images):
        path.write_bytes(tf.io.encode_png(image).numpy())
    expected = net(tf.stack([preprocess(image) for image in images]), training=False)[0]
    names = shapes.INFO.labels_to_names()
    return dict(work=work, paths=paths,
                expected=[names[int(c)] for c in np.argmax(expected.numpy(), -1)])


@pytest.mark.parametrize('name, signature', [('bytes', 'serving_bytes'),
                                             ('plain', 'serving_default')])
def test_image_files_are_classified_through_the_best_signature(exported, name, signature):
    result = run_script('scripts/predict_saved_model.py',
                        f'--saved_model_dir={exported["work"] / name}',
                        '--image_files=' + ','.join(map(str, exported['paths'])))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f'Signature: {signature}')
    for line, path, class_name in zip(lines[1:], exported['paths'], exported['expected']):
        assert line.startswith(f'{path}: {class_name} (class ')
