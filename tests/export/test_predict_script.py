"""scripts/predict_saved_model.py: image files through 'serving_bytes' when the SavedModel
has it, else preprocessed by the script for 'serving_preprocessed'."""
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
                                             ('plain', 'serving_preprocessed')])
def test_image_files_are_classified_through_the_best_signature(exported, name, signature):
    result = run_script('scripts/predict_saved_model.py',
                        f'--saved_model_dir={exported["work"] / name}',
                        '--image_files=' + ','.join(map(str, exported['paths'])))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f'Signature: {signature}')
    for line, path, class_name in zip(lines[1:], exported['paths'], exported['expected']):
        assert line.startswith(f'{path}: {class_name} (class ')


def test_a_damaged_file_is_skipped_and_every_good_one_predicted(exported):
    work = exported['work']
    good_jpeg = testing_utils.encoded_image(30, 30, seed=3)
    bad = {work / 'truncated.jpg': good_jpeg[:len(good_jpeg) // 2],
           work / 'empty.png': b'',
           work / 'notes.jpg': b'not an image at all\n',
           work / 'missing.png': None}
    for path, data in bad.items():
        if data is not None:
            path.write_bytes(data)
    good, damaged = exported['paths'], list(bad)
    order = [*damaged[:2], good[0], *damaged[2:], good[1]]  # bad ones among the good

    result = run_script('scripts/predict_saved_model.py',
                        f'--saved_model_dir={work / "bytes"}',
                        '--image_files=' + ','.join(map(str, order)))

    assert result.returncode == 0, result.stderr[-3000:]
    assert 'Traceback' not in result.stderr
    predictions = result.stdout.splitlines()[1:]
    assert [line.split(': ')[0] for line in predictions] == [str(p) for p in good]
    for line, class_name in zip(predictions, exported['expected']):
        assert line.split(': ')[1].startswith(f'{class_name} (class ')
    warnings = [line for line in result.stderr.splitlines() if line.startswith('WARNING: ')]
    assert [line.split(': ')[1].replace('skipped ', '') for line in warnings] == [
        str(p) for p in damaged]
    assert 'it is empty' in warnings[1] and 'it does not exist' in warnings[3]


def test_no_readable_file_is_one_error_line(exported):
    work = exported['work']
    (work / 'only_text.jpg').write_text('no image here\n')
    result = run_script('scripts/predict_saved_model.py',
                        f'--saved_model_dir={work / "plain"}',
                        f'--image_files={work / "only_text.jpg"}')
    assert result.returncode == 1 and 'Traceback' not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith('ERROR: ')]
    assert len(errors) == 1 and 'None of the 1 --image_files is an image' in errors[0]
