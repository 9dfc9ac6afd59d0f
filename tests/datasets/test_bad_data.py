"""Bad data that stops a job names the file (and record) and the fix; data that can be
skipped is skipped and counted."""
import numpy as np
import pytest
import tensorflow as tf

from core.errors import DataError
from datasets import dataset_factory, dataset_utils, input_pipeline
from preprocessing import preprocessing_factory


def _example(label, size=32, with_label=True):
    image = np.random.default_rng(label + 100).integers(0, 256, (size, size, 3), np.uint8)
    example = dataset_utils.image_to_tfexample(tf.io.encode_png(image).numpy(), b'png',
                                               32, 32, label)
    if not with_label:
        del example.features.feature['image/class/label']
    return example.SerializeToString()


def _write(path, records):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)


def _input_fn(dataset_dir, is_training=False, labels_offset=0, num_classes=10):
    spec = dataset_factory.get_dataset('shapes', 'validation', str(dataset_dir))
    return input_pipeline.make_input_fn(
        spec, preprocessing_factory.get_preprocessing('cifarnet', is_training),
        input_pipeline.InputConfig(batch_size=4, image_size=32, is_training=is_training,
                                   labels_offset=labels_offset, num_classes=num_classes,
                                   report_skipped=True, deterministic=True, seed=1))


def _shard(directory, index=0):
    return directory / f'shapes_validation_{index:05d}-of-00002.tfrecord'


@pytest.mark.parametrize('content', [b'', b'this is not a TFRecord file at all'])
def test_a_split_without_examples_is_an_error_at_start(tmp_path, content):
    for index in range(2):
        _shard(tmp_path, index).write_bytes(content)
    with pytest.raises(DataError, match='No examples in the 2 file'):
        _input_fn(tmp_path, is_training=True)


@pytest.mark.parametrize('bad_label, labels_offset, shown', [
    (10, 0, 'Label 10 of record 2'), (-1, 0, 'Label -1 of record 2'),
    (3, 5, 'Label -2 of record 0')])
@pytest.mark.parametrize('is_training', [False, True])
def test_a_label_out_of_range_stops_naming_value_file_and_record(
        tmp_path, bad_label, labels_offset, shown, is_training):
    first = [_example(7), _example(8), _example(bad_label)]
    if labels_offset:
        first = [_example(bad_label)]
    _write(_shard(tmp_path, 0), first)
    _write(_shard(tmp_path, 1), [_example(9)])
    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        for _ in _input_fn(tmp_path, is_training, labels_offset,
                           num_classes=10 - labels_offset)(None).take(20):
            pass
    message = input_pipeline.data_error_message(error.value)
    assert message is not None and shown in message, str(error.value)[-500:]
    assert str(_shard(tmp_path, 0)) in message and '--labels_offset' in message
    assert '\n' not in message


def test_records_without_a_label_or_with_a_wrong_size_image_are_skipped(tmp_path):
    # shapes images are 32x32: a 40x40 one, like one without a label, is skipped.
    _write(_shard(tmp_path, 0), [_example(1), _example(2, size=40),
                                 _example(3, with_label=False)])
    _write(_shard(tmp_path, 1), [_example(4)])
    batches = list(_input_fn(tmp_path)(None))
    labels = sorted(int(l) for _, labels, _ in batches for l in labels.numpy())
    assert labels == [1, 4]
    assert all(images.shape[1:] == (32, 32, 3) for images, _, _ in batches)
    assert int(batches[-1][2]) == 2  # both counted


@pytest.mark.parametrize('content, line', [('0:circle\nsquare\n', 'line 2'),
                                           ('zero:circle\n', 'line 1')])
def test_a_malformed_labels_file_is_one_line(tmp_path, content, line):
    (tmp_path / 'labels.txt').write_text(content)
    with pytest.raises(DataError, match=line) as error:
        dataset_utils.read_label_file(str(tmp_path))
    assert 'labels.txt' in str(error.value) and "'label:name'" in str(error.value)
