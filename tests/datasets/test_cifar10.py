import logging

import numpy as np
import pytest

from datasets import cifar10
from datasets import download


def test_download_and_convert_round_trips_pixels(cifar_archive, tmp_path, read_split):
    dataset_dir = tmp_path / "cifar10"

    cifar10.download_and_convert(str(dataset_dir), url=cifar_archive.url,
                                 sha256=cifar_archive.sha256)

    for split, count in [("train", 15), ("test", 4)]:
        images, labels = read_split("cifar10", split, dataset_dir)
        assert len(images) == count
        np.testing.assert_array_equal(images, cifar_archive.images[split])
        np.testing.assert_array_equal(labels, cifar_archive.labels[split])
    # Archive and extracted files are gone; only the outputs remain.
    assert sorted(p.name for p in dataset_dir.iterdir()) == [
        "cifar10_test.tfrecord", "cifar10_train.tfrecord", "labels.txt"]
    assert (dataset_dir / "labels.txt").read_text().splitlines()[9] == "9:truck"


def test_checksum_mismatch_is_rejected_and_nothing_left(cifar_archive, tmp_path):
    dataset_dir = tmp_path / "cifar10"

    with pytest.raises(download.ChecksumError, match="cifar-10-binary.tar.gz"):
        cifar10.download_and_convert(str(dataset_dir), url=cifar_archive.url,
                                     sha256="f" * 64)

    assert list(dataset_dir.iterdir()) == []


def test_rerun_skips_and_kept_archive_is_reused(cifar_archive, tmp_path, caplog,
                                                read_split):
    dataset_dir = tmp_path / "cifar10"
    cifar10.download_and_convert(str(dataset_dir), keep_archives=True,
                                 url=cifar_archive.url, sha256=cifar_archive.sha256)
    assert (dataset_dir / "cifar-10-binary.tar.gz").exists()
    cifar_archive.path.unlink()  # Any further download would now fail.

    with caplog.at_level(logging.INFO):
        cifar10.download_and_convert(str(dataset_dir), url=cifar_archive.url,
                                     sha256=cifar_archive.sha256)
    assert "already converted" in caplog.text

    (dataset_dir / "cifar10_train.tfrecord").unlink()
    cifar10.download_and_convert(str(dataset_dir), url=cifar_archive.url,
                                 sha256=cifar_archive.sha256)
    images, _ = read_split("cifar10", "train", dataset_dir)
    np.testing.assert_array_equal(images, cifar_archive.images["train"])


def test_read_binary_batch_rejects_truncated_file(tmp_path):
    path = tmp_path / "data_batch_1.bin"
    path.write_bytes(bytes(3073 + 5))

    with pytest.raises(ValueError, match="not a multiple"):
        cifar10.read_binary_batch(str(path))


def test_read_binary_batch_converts_chw_to_hwc(tmp_path):
    chw = np.arange(3 * 32 * 32, dtype=np.uint32).reshape(3, 32, 32) % 251
    path = tmp_path / "b.bin"
    path.write_bytes(bytes([6]) + chw.astype(np.uint8).tobytes())

    images, labels = cifar10.read_binary_batch(str(path))

    assert labels.tolist() == [6]
    assert images.shape == (1, 32, 32, 3)
    np.testing.assert_array_equal(images[0, 5, 7], chw[:, 5, 7])
