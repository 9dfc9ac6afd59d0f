"""tfds:<name>: a TFDS dataset prepared locally (a builder written here), read offline."""
import time

import numpy as np
import pytest
import tensorflow_datasets as tfds

from core.errors import UsageError
from datasets import dataset_factory, input_pipeline
from preprocessing import preprocessing_factory


class ToyFruits(tfds.core.GeneratorBasedBuilder):
    """Three classes of 8x8 images; prepared without any download."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(None, None, 3)),
                "label": tfds.features.ClassLabel(names=["apple", "banana", "cherry"]),
            }),
            supervised_keys=("image", "label"))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(9), "test": self._generate_examples(4)}

    def _generate_examples(self, count):
        rng = np.random.default_rng(count)
        for index in range(count):
            yield index, {"image": rng.integers(0, 256, (8, 6 + index % 3, 3), np.uint8),
                          "label": index % 3}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tfds")
    ToyFruits(data_dir=str(directory)).download_and_prepare()
    return str(directory)


def test_reads_a_prepared_dataset_by_name(data_dir):
    spec = dataset_factory.get_dataset("tfds:toy_fruits", "train", data_dir)
    assert (spec.num_samples, spec.num_classes) == (9, 3)
    assert spec.labels_to_names == {0: "apple", 1: "banana", 2: "cherry"}
    input_fn = input_pipeline.make_input_fn(
        spec, preprocessing_factory.get_preprocessing("lenet"),
        input_pipeline.InputConfig(batch_size=4, image_size=8, is_training=False))
    labels = np.concatenate([labels.numpy() for _, labels in input_fn(None)])
    assert sorted(labels.tolist()) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    info = dataset_factory.get_info("tfds:toy_fruits", data_dir)
    assert info.splits_to_sizes == {"train": 9, "test": 4}


def test_unknown_split_names_the_tfds_splits(data_dir):
    with pytest.raises(UsageError, match="use one of: .*train"):
        dataset_factory.get_dataset("tfds:toy_fruits", "validation", data_dir)


def test_unprepared_dataset_is_one_line_at_once(tmp_path):
    started = time.time()
    with pytest.raises(UsageError) as error:
        dataset_factory.get_dataset("tfds:oxford_flowers102", "train", str(tmp_path))
    assert time.time() - started < 5
    message = str(error.value)
    assert "not prepared" in message and "--dataset_name=tfds:oxford_flowers102" in message
    assert "\n" not in message
