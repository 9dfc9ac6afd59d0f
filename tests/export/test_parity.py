"""The parity check's images: never the int8 calibration images, so that ranges
calibrated too narrowly show; and an int8 model judged on real images."""
import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils

from core.errors import UsageError
from core.naming import slim_name
from datasets import dataset_factory
from export import exporter, parity, pipeline, tflite
from nets import nets_factory
from preprocessing import preprocessing_factory

SHAPE = (32, 32, 3)


@pytest.fixture(scope='module')
def shapes_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(directory), num_train=12, num_validation=12)
    return str(directory)


def _preprocess(image):
    return tf.image.resize(tf.cast(image, tf.float32) / 255.0, SHAPE[:2])


def _split(shapes_dir, split_name):
    return dataset_factory.get_dataset('shapes', split_name, shapes_dir)


def test_synthetic_calibration_images_are_not_the_parity_images():
    checked = parity.load_examples(8, SHAPE, preprocess=_preprocess)
    calibration = parity.load_calibration_examples(20, SHAPE, preprocess=_preprocess)
    assert not set(checked.encoded) & set(calibration.encoded)
    assert 'seed 1' in calibration.source and 'seed 0' in checked.source
    # Without preprocessing (video nets), the inputs themselves differ.
    inputs = parity.load_examples(4, (2, 8, 8, 3))
    calibration_inputs = parity.load_calibration_examples(4, (2, 8, 8, 3))
    assert not any(np.array_equal(a, b) for a in inputs.images
                   for b in calibration_inputs.images)


def test_one_split_for_both_gives_calibration_the_images_after_the_parity_ones(shapes_dir):
    spec = _split(shapes_dir, 'validation')
    every = parity.load_examples(12, SHAPE, preprocess=_preprocess, spec=spec).encoded
    checked = parity.load_examples(5, SHAPE, preprocess=_preprocess, spec=spec)
    calibration = parity.load_calibration_examples(
        100, SHAPE, preprocess=_preprocess, spec=_split(shapes_dir, 'validation'),
        parity_spec=spec, num_parity_examples=5)
    assert checked.encoded == every[:5] and calibration.encoded == every[5:]
    assert calibration.source == '7 images of shapes/validation (from image 6 on)'


def test_another_split_calibrates_from_its_first_image(shapes_dir):
    train = parity.load_examples(3, SHAPE, preprocess=_preprocess,
                                 spec=_split(shapes_dir, 'train'))
    calibration = parity.load_calibration_examples(
        3, SHAPE, preprocess=_preprocess, spec=_split(shapes_dir, 'train'),
        parity_spec=_split(shapes_dir, 'validation'), num_parity_examples=5)
    assert calibration.encoded == train.encoded


def test_a_split_used_up_by_the_parity_check_is_one_line(shapes_dir):
    spec = _split(shapes_dir, 'validation')
    with pytest.raises(UsageError, match=r'^shapes/validation has no images left after '
                       r'the 12 parity images .*--calibration_split_name or fewer '
                       r'--num_parity_examples\.$'):
        parity.load_calibration_examples(4, SHAPE, preprocess=_preprocess, spec=spec,
                                         parity_spec=spec, num_parity_examples=12)


def test_the_export_job_calibrates_past_the_parity_images_of_a_shared_split(
        shapes_dir, tmp_path, capsys, monkeypatch):
    from cli import export_job
    logged = []
    monkeypatch.setattr(export_job.logging, 'info',
                        lambda message, *args: logged.append(message % args))
    targets = pipeline.resolve_targets(['tflite_int8'], export_dir=str(tmp_path))
    export_job.export(
        export_job.ExportConfig(model_name='lenet', dataset_name='shapes',
                                dataset_dir=shapes_dir, num_parity_examples=5,
                                calibration_split_name='validation'),
        pipeline.ExportRequest(targets, min_int8_agreement=0))  # fresh weights
    assert 'Parity check on 5 images of shapes/validation.' in capsys.readouterr().out
    assert ('Calibrating the int8 model on 7 images of shapes/validation (from image 6 '
            'on).') in logged


def _golden_network(model_name, num_classes, image_size):
    """The net with slim_reference's deterministic weights (logits spread)."""
    net = nets_factory.get_network_fn(model_name, num_classes)
    net.build((image_size, image_size, 3))
    for variable in net.variables:
        variable.assign(testing_utils.golden_weight_value(slim_name(variable),
                                                          variable.shape))
    return net


def test_int8_ranges_calibrated_too_narrowly_fail_in_one_line(shapes_dir, tmp_path):
    """Calibrated on images 20 times fainter than those it is checked on, the int8
    model's activations saturate: it disagrees with the float model beyond the bound."""
    net = _golden_network('cifarnet', 10, 32)
    preprocess_image = preprocessing_factory.get_preprocessing('cifarnet')
    preprocess = lambda image: preprocess_image(image, 32, 32)  # noqa: E731
    checked = parity.load_examples(12, SHAPE, preprocess=preprocess,
                                   spec=_split(shapes_dir, 'validation'))
    faint = parity.load_calibration_examples(12, SHAPE, preprocess=preprocess,
                                             spec=_split(shapes_dir, 'train')).images / 20
    targets = pipeline.resolve_targets(['tflite_int8'], export_dir=str(tmp_path))
    lines = []
    with pytest.raises(parity.ParityCheckFailed) as error:
        pipeline.export(net, exporter.ServingInfo(SHAPE), pipeline.ExportRequest(targets),
                        checked, calibration=lambda: faint, log=lines.append)
    assert str(error.value).startswith('Export tflite_int8 failed its parity check: int8 '
                                       'top-1 agreement with the model is ')
    assert 'under --min_int8_agreement=0.95' in str(error.value)
    assert lines[-1].startswith('parity tflite_int8: max |logit diff| ')
    assert lines[-1].endswith('at least 95% agreement: FAILED')
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_inception_v3_int8_calibrated_on_synthetic_images_is_judged_on_real_ones(
        shapes_dir, tmp_path):
    """Calibrated on synthetic images, checked on real (drawn) ones: the int8 model
    either agrees with the float model on the real images as the bound asks, or the
    export fails in one line and leaves nothing."""
    net = _golden_network('inception_v3', 1001, 299)
    preprocess_image = preprocessing_factory.get_preprocessing('inception')
    preprocess = lambda image: preprocess_image(image, 299, 299)  # noqa: E731
    shape = (299, 299, 3)
    real = parity.load_examples(12, shape, preprocess=preprocess,
                                spec=_split(shapes_dir, 'validation'))
    targets = pipeline.resolve_targets(['tflite_int8'], export_dir=str(tmp_path))
    lines = []
    try:
        results = pipeline.export(
            net, exporter.ServingInfo(shape), pipeline.ExportRequest(targets), real,
            calibration=lambda: parity.load_calibration_examples(
                32, shape, preprocess=preprocess).images, log=lines.append)
    except parity.ParityCheckFailed as error:
        message = str(error)
        assert message.startswith('Export tflite_int8 failed its parity check: int8 top-1 '
                                  'agreement with the model is ') and '\n' not in message
        assert 'calibrate on real images with --dataset_dir' in message
        assert not list(tmp_path.iterdir())
        assert lines[-1].startswith('parity tflite_int8: max |logit diff| ')
        assert lines[-1].endswith('FAILED')
    else:
        (result,) = results
        assert result.ok and result.agreement >= 0.95
        logits = tflite.Runner(targets['tflite_int8'])(real.images)['logits']
        expected = net(real.images, training=False)[0].numpy()
        assert np.mean(logits.argmax(-1) == expected.argmax(-1)) >= 0.95
