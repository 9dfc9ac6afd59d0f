import logging

import numpy as np
import pytest

from datasets import dataset_factory
from datasets import shapes


@pytest.fixture
def generated_dir(shapes_dir):
    return shapes_dir


def test_writes_every_split_with_its_size_and_balanced_classes(generated_dir, read_split):
    for split, size in [("train", 5000), ("validation", 1000)]:
        images, labels = read_split("shapes", split, generated_dir)

        assert images.shape == (size, 32, 32, 3)
        np.testing.assert_array_equal(np.bincount(labels, minlength=10), [size // 10] * 10)
        # The files hold exactly what the generator draws.
        expected_images, expected_labels = shapes.generate_split(split)
        np.testing.assert_array_equal(images, expected_images)
        np.testing.assert_array_equal(labels, expected_labels)
    assert (generated_dir / "labels.txt").read_text().splitlines()[0] == "0:circle"


def test_file_names_follow_the_pattern(generated_dir):
    assert sorted(p.name for p in generated_dir.iterdir()) == [
        "labels.txt",
        "shapes_train_00000-of-00002.tfrecord", "shapes_train_00001-of-00002.tfrecord",
        "shapes_validation_00000-of-00002.tfrecord",
        "shapes_validation_00001-of-00002.tfrecord"]
    spec = dataset_factory.get_dataset("shapes", "validation", str(generated_dir))
    assert len(spec.list_files()) == 2


def test_different_seed_gives_different_images():
    images_a, labels_a = shapes.generate(100, seed=1)
    images_b, labels_b = shapes.generate(100, seed=2)
    images_c, labels_c = shapes.generate(100, seed=1)

    assert not np.array_equal(images_a, images_b)
    assert not np.array_equal(labels_a, labels_b)
    np.testing.assert_array_equal(images_a, images_c)
    np.testing.assert_array_equal(labels_a, labels_c)


def test_splits_differ():
    train, _ = shapes.generate_split("train")
    validation, _ = shapes.generate_split("validation")
    assert not np.array_equal(train[:1000], validation)


def test_images_vary_and_show_a_shape():
    images, labels = shapes.generate(200, seed=3)

    assert images.dtype == np.uint8 and labels.dtype == np.int64
    # The shape is brighter than the background: bright pixels cover a visible area.
    brightness = images.astype(float).mean(axis=-1)
    background = np.median(brightness, axis=(1, 2))
    shape_pixels = (brightness > background[:, None, None] + 40).sum(axis=(1, 2))
    assert shape_pixels.min() >= 10
    assert shape_pixels.max() < 32 * 32 / 2
    # Colours and positions vary between images.
    assert len(np.unique(background.round())) > 50


def test_rerun_skips_existing_output(generated_dir, caplog):
    before = {p.name: p.stat().st_mtime_ns for p in generated_dir.iterdir()}

    with caplog.at_level(logging.INFO):
        shapes.download_and_convert(str(generated_dir), seed=99)

    assert "already generated" in caplog.text
    assert {p.name: p.stat().st_mtime_ns for p in generated_dir.iterdir()} == before
