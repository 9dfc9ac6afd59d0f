import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf

from datasets import dataset_factory
from datasets import dataset_utils
from core.errors import UsageError


def test_dataset_names():
    assert dataset_factory.dataset_names() == (
        "cifar10", "flowers", "image_folder", "imagenet", "mnist", "shapes",
        "visualwakewords")


@pytest.mark.parametrize("name, split, path, samples, shape, first_class", [
    ("mnist", "train", "mnist_train.tfrecord", 60000, (28, 28, 1), "zero"),
    ("mnist", "test", "mnist_test.tfrecord", 10000, (28, 28, 1), "zero"),
    ("cifar10", "train", "cifar10_train.tfrecord", 50000, (32, 32, 3), "airplane"),
    ("cifar10", "test", "cifar10_test.tfrecord", 10000, (32, 32, 3), "airplane"),
    ("shapes", "train", "shapes_train_*.tfrecord", 5000, (32, 32, 3), "circle"),
    ("shapes", "validation", "shapes_validation_*.tfrecord", 1000, (32, 32, 3), "circle"),
])
def test_get_dataset_describes_split(name, split, path, samples, shape, first_class):
    spec = dataset_factory.get_dataset(name, split, "/data")

    assert spec.name == name and spec.split_name == split
    assert spec.file_pattern == os.path.join("/data", path)
    assert spec.num_samples == samples
    assert spec.num_classes == 10 == len(spec.labels_to_names)
    assert spec.labels_to_names[0] == first_class
    assert spec.image_shape == shape
    assert set(spec.items_to_descriptions) == {"image", "label"}


def test_spec_is_frozen():
    spec = dataset_factory.get_dataset("mnist", "train", "/data")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.num_samples = 1


def test_cifar10_class_names():
    names = dataset_factory.get_dataset("cifar10", "test", "/d").labels_to_names
    assert list(names.values()) == ["airplane", "automobile", "bird", "cat", "deer", "dog",
                                    "frog", "horse", "ship", "truck"]


def test_labels_file_overrides_built_in_names(tmp_path):
    dataset_utils.write_label_file({0: "nought", 1: "uno"}, str(tmp_path))

    spec = dataset_factory.get_dataset("mnist", "train", str(tmp_path))

    assert spec.labels_to_names == {0: "nought", 1: "uno"}


def test_file_pattern_override_is_a_template_relative_to_dataset_dir():
    spec = dataset_factory.get_dataset("mnist", "test", "/d", file_pattern="sub/m_%s-*.rec")
    assert spec.file_pattern == "/d/sub/m_test-*.rec"


def test_unknown_name_lists_valid_names():
    with pytest.raises(UsageError, match=r"'imagenet2'.*cifar10, flowers, .*tfds:<name>"):
        dataset_factory.get_dataset("imagenet2", "train", "/d")


def test_unknown_split_lists_valid_splits():
    with pytest.raises(UsageError, match=r"'validation'.*train, test"):
        dataset_factory.get_dataset("mnist", "validation", "/d")


@pytest.mark.parametrize("dataset_dir", [None, ""])
def test_missing_dataset_dir_names_the_flag(dataset_dir):
    with pytest.raises(UsageError, match="--dataset_dir"):
        dataset_factory.get_dataset("mnist", "train", dataset_dir)


def test_download_and_convert_rejects_missing_name_and_dir():
    with pytest.raises(UsageError, match="--dataset_name.*cifar10, flowers, image_folder"):
        dataset_factory.download_and_convert(None, "/d")
    with pytest.raises(UsageError, match="--dataset_dir"):
        dataset_factory.download_and_convert("mnist", "")


def test_list_files_without_data_names_the_fix(tmp_path):
    spec = dataset_factory.get_dataset("mnist", "train", str(tmp_path))

    with pytest.raises(UsageError) as error:
        spec.list_files()

    message = str(error.value)
    assert f"No files match {tmp_path}/mnist_train.tfrecord" in message
    assert (f"download_and_convert_data.py --dataset_name=mnist --dataset_dir={tmp_path}"
            in message)
    assert "\n" not in message


def test_list_files_is_sorted_and_split_specific(tmp_path):
    for name in ["shapes_train_00001-of-00002.tfrecord", "shapes_train_00000-of-00002.tfrecord",
                 "shapes_validation_00000-of-00001.tfrecord",
                 "shapes_train_00002-of-00002.tfrecord.incomplete"]:
        (tmp_path / name).write_bytes(b"")

    files = dataset_factory.get_dataset("shapes", "train", str(tmp_path)).list_files()

    assert [os.path.basename(f) for f in files] == [
        "shapes_train_00000-of-00002.tfrecord", "shapes_train_00001-of-00002.tfrecord"]


def test_decode_in_dataset_map_gives_static_shape_and_types(tmp_path):
    image = np.arange(28 * 28, dtype=np.uint8).reshape(28, 28, 1)
    dataset_utils.write_tfrecord(str(tmp_path / "mnist_test.tfrecord"), image[None], [4])
    spec = dataset_factory.get_dataset("mnist", "test", str(tmp_path))

    dataset = tf.data.TFRecordDataset(spec.list_files()).map(spec.decode)

    image_spec, label_spec = dataset.element_spec
    assert image_spec.shape == (28, 28, 1) and image_spec.dtype == tf.uint8
    assert label_spec.shape == () and label_spec.dtype == tf.int64
    decoded, label = next(iter(dataset))
    np.testing.assert_array_equal(decoded.numpy(), image)
    assert label.numpy() == 4


def test_decode_rejects_image_of_wrong_size(tmp_path):
    dataset_utils.write_tfrecord(str(tmp_path / "mnist_test.tfrecord"),
                                 np.zeros((1, 5, 5, 1), np.uint8), [0])
    spec = dataset_factory.get_dataset("mnist", "test", str(tmp_path))

    dataset = tf.data.TFRecordDataset(spec.list_files()).map(spec.decode)

    with pytest.raises(tf.errors.InvalidArgumentError):
        next(iter(dataset))


def test_a_dataset_dir_holding_another_dataset_is_refused(tmp_path):
    """The converter's dataset_info.json names the dataset; a labels.txt naming classes
    beyond the dataset's is another dataset's."""
    dataset_utils.write_json(str(tmp_path / dataset_utils.METADATA_FILENAME),
                             {"name": "image_folder"})
    with pytest.raises(UsageError, match=r"holds the image_folder dataset .*not imagenet: "
                                         r"pass --dataset_name=image_folder\."):
        dataset_factory.get_dataset("imagenet", "train", str(tmp_path))
    other = tmp_path / "other"
    other.mkdir()
    dataset_utils.write_label_file(dict(enumerate("abcdefg")), str(other))
    with pytest.raises(UsageError, match=r"names 7 classes \(ids 0 to 6\), but flowers has 5"):
        dataset_factory.get_info("flowers", str(other))
    assert dataset_factory.get_info("mnist", str(other)).num_classes == 10
