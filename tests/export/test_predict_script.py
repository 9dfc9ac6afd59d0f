"""predict_image_classifier.py: image files through 'serving_bytes' when the SavedModel
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


@pytest.mark.parametrize('name, signature, model', [
    ('bytes', 'serving_bytes', []),
    # An older SavedModel: preprocessed here as the named model's family.
    ('plain', 'serving_preprocessed (preprocessing: cifarnet)', ['--model_name=cifarnet'])])
def test_image_files_are_classified_through_the_best_signature(exported, name, signature,
                                                               model):
    result = run_script('predict_image_classifier.py',
                        f'--saved_model_dir={exported["work"] / name}', *model,
                        '--image_files=' + ','.join(map(str, exported['paths'])))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == f'Signature: {signature}'
    for line, path, class_name in zip(lines[1:], exported['paths'], exported['expected']):
        assert line.startswith(f'{path}: {class_name} (class ')


def test_folders_patterns_and_files_are_predicted_one_line_each(exported, tmp_path):
    """A folder (sub-folders included, sorted), a quoted pattern the script expands,
    and a file, in one comma list; a non-image inside the folder and a pattern matching
    nothing are warned about and skipped."""
    images = dict(zip('ab', (path.read_bytes() for path in exported['paths'])))
    classes = dict(zip('ab', exported['expected']))
    folder, more = tmp_path / 'new_photos', tmp_path / 'more'
    made = {}
    for path, image in [(folder / 'b.png', 'b'), (folder / 'a.png', 'a'),
                        (folder / 'trip' / 'c.png', 'a'), (folder / '.hidden.png', 'a'),
                        (more / 'x1.png', 'b'), (more / 'x2.png', 'a'), (more / 'y.png', 'a')]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(images[image])
        made[str(path)] = classes[image]
    (folder / 'notes.txt').write_text('not an image\n')
    made[str(exported['paths'][0])] = classes['a']

    result = run_script('predict_image_classifier.py',
                        f'--saved_model_dir={exported["work"] / "bytes"}',
                        f'--image_files={folder},{more}/x*.png,{exported["paths"][0]},'
                        f'{tmp_path}/none*.jpg')

    assert result.returncode == 0 and 'Traceback' not in result.stderr, result.stderr[-3000:]
    lines = result.stdout.splitlines()[1:]
    assert [line.split(': ')[0] for line in lines] == [str(p) for p in (
        folder / 'a.png', folder / 'b.png', folder / 'trip' / 'c.png', more / 'x1.png',
        more / 'x2.png', exported['paths'][0])]
    for line in lines:
        path, prediction = line.split(': ')
        assert prediction.startswith(f'{made[path]} (class '), line
    warnings = [line for line in result.stderr.splitlines() if line.startswith('WARNING: ')]
    assert warnings == [
        f'WARNING: skipped {tmp_path}/none*.jpg: the pattern matches no file.',
        f'WARNING: skipped {folder / "notes.txt"}: not a JPEG, PNG, GIF, BMP or WebP file.']


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

    result = run_script('predict_image_classifier.py',
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
    assert 'the file is empty' in warnings[1] and 'it does not exist' in warnings[3]


def test_no_readable_file_is_one_error_line(exported):
    work = exported['work']
    (work / 'only_text.jpg').write_text('no image here\n')
    result = run_script('predict_image_classifier.py',
                        f'--saved_model_dir={work / "bytes"}',
                        f'--image_files={work / "only_text.jpg"}')
    assert result.returncode == 1 and 'Traceback' not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith('ERROR: ')]
    assert len(errors) == 1 and 'None of the 1 files of --image_files is an image' in errors[0]
