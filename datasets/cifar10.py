"""CIFAR-10: 32x32 colour images of 10 classes, converted to TF-Slim's TFRecords.

Source: the binary release https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz,
parsed record by record (1 label byte + 3072 bytes of CHW pixels); nothing is unpickled.
"""
import os
import shutil
import tempfile

from absl import logging
import numpy as np

from datasets import dataset_utils
from datasets import download

INFO = dataset_utils.DatasetInfo(
    name="cifar10",
    splits_to_sizes={"train": 50000, "test": 10000},
    num_classes=10,
    file_pattern="cifar10_%s.tfrecord",
    image_shape=(32, 32, 3),
    class_names=("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                 "ship", "truck"),
    items_to_descriptions={
        "image": "A [32 x 32 x 3] color image.",
        "label": "A single integer between 0 and 9",
    },
)

DATA_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
# From tensorflow_datasets/url_checksums/cifar10.txt.
SHA256 = "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd"

_ARCHIVE_DIR = "cifar-10-batches-bin"
_SPLIT_FILES = {
    "train": [f"data_batch_{i}.bin" for i in range(1, 6)],
    "test": ["test_batch.bin"],
}
_HEIGHT, _WIDTH, _CHANNELS = INFO.image_shape
_RECORD_BYTES = 1 + _HEIGHT * _WIDTH * _CHANNELS


def read_binary_batch(path: str) -> tuple[np.ndarray, np.ndarray]:
    """Reads one CIFAR-10 .bin file into uint8 images [N, 32, 32, 3] and int64 labels."""
    data = np.fromfile(path, dtype=np.uint8)
    if data.size % _RECORD_BYTES:
        raise ValueError(f"{path} has {data.size} bytes, not a multiple of the "
                         f"{_RECORD_BYTES}-byte CIFAR-10 record")
    records = data.reshape(-1, _RECORD_BYTES)
    labels = records[:, 0].astype(np.int64)
    # Pixels are stored channel-major (all red, then green, then blue).
    images = records[:, 1:].reshape(-1, _CHANNELS, _HEIGHT, _WIDTH).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def output_paths(dataset_dir: str) -> list[str]:
    return [os.path.join(dataset_dir, INFO.file_pattern % split) for split in _SPLIT_FILES]


def download_and_convert(dataset_dir: str, keep_archives: bool = False,
                         url: str = DATA_URL, sha256: str = SHA256) -> None:
    """Downloads the binary archive and writes cifar10_{train,test}.tfrecord and labels.txt.

    Skips everything if the outputs already exist. url and sha256 are arguments so tests
    can serve their own small archive.
    """
    if dataset_utils.is_converted(output_paths(dataset_dir), dataset_dir):
        logging.info("CIFAR-10 already converted in %s; skipping", dataset_dir)
        return
    os.makedirs(dataset_dir, exist_ok=True)

    archive = os.path.join(dataset_dir, url.rstrip("/").rsplit("/", 1)[-1])
    downloaded = download.fetch_file(url, archive, sha256)
    # A fresh directory per run, so files from an older or aborted run never mix in.
    extract_dir = tempfile.mkdtemp(dir=dataset_dir, prefix="cifar10_extract_")
    try:
        download.extract_tar(archive, extract_dir)
        for split, batch_files in _SPLIT_FILES.items():
            batches = [read_binary_batch(os.path.join(extract_dir, _ARCHIVE_DIR, name))
                       for name in batch_files]
            images = np.concatenate([images for images, _ in batches])
            labels = np.concatenate([labels for _, labels in batches])
            dataset_utils.write_tfrecord(
                os.path.join(dataset_dir, INFO.file_pattern % split), images, labels)
    finally:
        shutil.rmtree(extract_dir)

    # labels.txt last: its presence marks a finished conversion.
    dataset_utils.write_label_file(INFO.labels_to_names(), dataset_dir)
    if downloaded and not keep_archives:  # a copy that was there is not ours
        os.remove(archive)
    logging.info("Finished converting CIFAR-10 into %s", dataset_dir)
