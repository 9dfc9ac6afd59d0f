"""Flowers from a small flower_photos.tgz in the original layout, through the converter."""
import collections
import hashlib
import io
import tarfile

import pytest
import tensorflow as tf
from helpers.testing_utils import encoded_image

from datasets import dataset_factory, dataset_utils, download, flowers

CLASSES = ("daisy", "dandelion", "roses", "sunflowers", "tulips")


def _add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def flowers_archive(tmp_path):
    path = tmp_path / "src" / "flower_photos.tgz"
    path.parent.mkdir()
    with tarfile.open(path, "w:gz") as tar:
        _add(tar, "flower_photos/LICENSE.txt", b"photos under CC-BY\n")
        for label, name in enumerate(CLASSES):
            for index in range(3):
                _add(tar, f"flower_photos/{name}/{index}_{name}.jpg",
                     encoded_image(16 + index, 20, seed=label * 3 + index))
    return path


def _convert(archive, dataset_dir):
    flowers.download_and_convert(str(dataset_dir), dataset_utils.ConvertOptions(),
                                 url=archive.as_uri(), sha256=hashlib.sha256(archive.read_bytes()).hexdigest(),
                                 num_validation=4)


def test_converts_five_shards_per_split_as_tf_slim(flowers_archive, tmp_path, read_split):
    out = tmp_path / "flowers"
    _convert(flowers_archive, out)

    for split in ("train", "validation"):
        assert len(list(out.glob(f"flowers_{split}_*-of-00005.tfrecord"))) == 5
    assert (out / "labels.txt").read_text().splitlines() == [
        f"{i}:{n}" for i, n in enumerate(CLASSES)]
    _, train_labels = read_split("flowers", "train", out)
    _, validation_labels = read_split("flowers", "validation", out)
    assert (len(train_labels), len(validation_labels)) == (11, 4)
    assert collections.Counter([*train_labels, *validation_labels]) == {i: 3 for i in range(5)}
    record = next(iter(tf.data.TFRecordDataset(
        sorted(out.glob("flowers_train_00000-*"))[0])))
    example = tf.train.Example.FromString(record.numpy())
    assert example.features.feature["image/format"].bytes_list.value == [b"jpg"]
    assert not flowers_archive.with_name("x").exists()
    assert not list(out.glob("*.tgz")) and not list(out.glob("flowers_extract_*"))
    spec = dataset_factory.get_dataset("flowers", "validation", str(out))
    assert spec.num_samples == 350 and spec.labels_to_names[4] == "tulips"


def test_split_is_the_same_on_every_run(flowers_archive, tmp_path, read_split):
    for name in ("a", "b"):
        _convert(flowers_archive, tmp_path / name)
    assert (read_split("flowers", "validation", tmp_path / "a")[1].tolist()
            == read_split("flowers", "validation", tmp_path / "b")[1].tolist())


def test_member_escaping_the_directory_is_refused(tmp_path):
    archive = tmp_path / "flower_photos.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        _add(tar, "flower_photos/../../evil.jpg", b"x")
    with pytest.raises(download.UnsafeArchiveError, match="contains '..'"):
        _convert(archive, tmp_path / "out")
    assert not (tmp_path / "evil.jpg").exists()
