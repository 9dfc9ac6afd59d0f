import logging

import numpy as np
import pytest
import tensorflow as tf

from datasets import download
from datasets import mnist


def _convert(server, files, dataset_dir, **kwargs):
    mnist.download_and_convert(str(dataset_dir), base_url=server.base_url,
                               sha256s=files.sha256s, **kwargs)


def test_download_and_convert_round_trips_pixels(http_server, mnist_files, tmp_path,
                                                  read_split):
    dataset_dir = tmp_path / "mnist"

    _convert(http_server, mnist_files, dataset_dir)

    for split in ["train", "test"]:
        images, labels = read_split("mnist", split, dataset_dir)
        np.testing.assert_array_equal(images, mnist_files.images[split])
        np.testing.assert_array_equal(labels, mnist_files.labels[split])
    # Archives are deleted by default, as TF-Slim did.
    assert sorted(p.name for p in dataset_dir.iterdir()) == [
        "labels.txt", "mnist_test.tfrecord", "mnist_train.tfrecord"]
    assert (dataset_dir / "labels.txt").read_text().splitlines() == [
        "0:zero", "1:one", "2:two", "3:three", "4:four", "5:five", "6:six", "7:seven",
        "8:eight", "9:nine"]


def test_records_carry_slim_metadata(http_server, mnist_files, tmp_path):
    _convert(http_server, mnist_files, tmp_path / "m")

    record = next(tf.data.TFRecordDataset(str(tmp_path / "m" / "mnist_test.tfrecord"))
                  .as_numpy_iterator())
    feature = tf.train.Example.FromString(record).features.feature
    assert feature["image/format"].bytes_list.value == [b"png"]
    assert feature["image/height"].int64_list.value == [28]
    assert feature["image/width"].int64_list.value == [28]
    assert feature["image/class/label"].int64_list.value == [mnist_files.labels["test"][0]]


def test_checksum_mismatch_is_rejected_and_nothing_left(http_server, mnist_files, tmp_path):
    sha256s = dict(mnist_files.sha256s)
    sha256s["train-images-idx3-ubyte.gz"] = "0" * 64
    dataset_dir = tmp_path / "mnist"

    with pytest.raises(download.ChecksumError, match="train-images-idx3-ubyte.gz"):
        mnist.download_and_convert(str(dataset_dir), base_url=http_server.base_url,
                                   sha256s=sha256s)

    assert list(dataset_dir.iterdir()) == []


def test_rerun_skips_converted_data(http_server, mnist_files, tmp_path, caplog):
    dataset_dir = tmp_path / "mnist"
    _convert(http_server, mnist_files, dataset_dir)
    before = (dataset_dir / "mnist_train.tfrecord").stat().st_mtime_ns
    requests = len(http_server.requests)

    with caplog.at_level(logging.INFO):
        _convert(http_server, mnist_files, dataset_dir)

    assert "already converted" in caplog.text
    assert len(http_server.requests) == requests
    assert (dataset_dir / "mnist_train.tfrecord").stat().st_mtime_ns == before


def test_kept_archives_are_reused(http_server, mnist_files, tmp_path, read_split):
    dataset_dir = tmp_path / "mnist"
    _convert(http_server, mnist_files, dataset_dir, keep_archives=True)
    assert (dataset_dir / "t10k-images-idx3-ubyte.gz").exists()
    (dataset_dir / "mnist_test.tfrecord").unlink()
    requests = len(http_server.requests)

    _convert(http_server, mnist_files, dataset_dir, keep_archives=True)

    assert len(http_server.requests) == requests  # Converted again from kept archives.
    images, _ = read_split("mnist", "test", dataset_dir)
    np.testing.assert_array_equal(images, mnist_files.images["test"])


def test_bad_idx_header_is_reported(tmp_path):
    import gzip
    path = tmp_path / "bad.gz"
    with gzip.open(path, "wb") as f:
        f.write(np.array([1234, 1, 28, 28], ">u4").tobytes() + bytes(784))

    with pytest.raises(ValueError, match="not an idx3 image file"):
        mnist.read_idx_images(str(path))
