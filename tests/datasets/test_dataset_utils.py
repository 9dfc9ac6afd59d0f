import numpy as np
import tensorflow as tf

from datasets import dataset_utils


def _parse(serialized):
    return tf.train.Example.FromString(serialized).features.feature


def test_image_to_tfexample_uses_slim_keys():
    example = dataset_utils.image_to_tfexample(b"\x89PNG...", b"png", 28, 14, 7)

    feature = example.features.feature
    assert set(feature) == {"image/encoded", "image/format", "image/class/label",
                            "image/height", "image/width"}
    assert feature["image/encoded"].bytes_list.value == [b"\x89PNG..."]
    assert feature["image/format"].bytes_list.value == [b"png"]
    assert feature["image/class/label"].int64_list.value == [7]
    assert feature["image/height"].int64_list.value == [28]
    assert feature["image/width"].int64_list.value == [14]


def test_write_tfrecord_round_trips_pixels_and_labels(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (5, 6, 4, 3), dtype=np.uint8)
    labels = [3, 0, 9, 1, 1]
    path = str(tmp_path / "x.tfrecord")

    dataset_utils.write_tfrecord(path, images, labels)

    records = list(tf.data.TFRecordDataset(path).as_numpy_iterator())
    assert len(records) == 5
    first = _parse(records[0])
    assert first["image/format"].bytes_list.value == [b"png"]
    assert first["image/height"].int64_list.value == [6]
    assert first["image/width"].int64_list.value == [4]
    for record, image, label in zip(records, images, labels):
        decoded, decoded_label = dataset_utils.decode_example(record, (6, 4, 3))
        np.testing.assert_array_equal(decoded.numpy(), image)
        assert decoded_label.dtype == tf.int64 and decoded_label.numpy() == label
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.tfrecord"]  # No temp file left.


def test_decode_example_reads_jpeg_and_sets_static_shape():
    # TF-Slim's flowers/imagenet converters wrote JPEG; decoding must sniff the format.
    image = np.full((8, 8, 3), 200, np.uint8)
    jpeg = tf.io.encode_jpeg(image, quality=100).numpy()
    serialized = dataset_utils.image_to_tfexample(jpeg, b"jpeg", 8, 8, 2).SerializeToString()

    dataset = tf.data.Dataset.from_tensors(serialized).map(
        lambda s: dataset_utils.decode_example(s, (8, 8, 3)))

    assert dataset.element_spec[0].shape == (8, 8, 3)
    decoded, label = next(iter(dataset))
    assert np.abs(decoded.numpy().astype(int) - 200).max() <= 2
    assert label.numpy() == 2


def test_label_file_round_trip(tmp_path):
    labels = {2: "bird", 0: "airplane", 1: "odd:name"}

    assert not dataset_utils.has_labels(str(tmp_path))
    dataset_utils.write_label_file(labels, str(tmp_path))

    assert dataset_utils.has_labels(str(tmp_path))
    assert (tmp_path / "labels.txt").read_text() == "0:airplane\n1:odd:name\n2:bird\n"
    assert dataset_utils.read_label_file(str(tmp_path)) == labels


def test_read_label_file_accepts_slim_written_file(tmp_path):
    (tmp_path / "labels.txt").write_text("0:zero\n1:one\n\n")

    assert dataset_utils.read_label_file(str(tmp_path)) == {0: "zero", 1: "one"}
