"""MNIST: 28x28 grayscale handwritten digits, converted to TF-Slim's TFRecords.

Source: the idx files mirrored at https://storage.googleapis.com/cvdf-datasets/mnist/.
"""
import gzip
import os
from typing import Mapping

from absl import logging
import numpy as np

from datasets import dataset_utils
from datasets import download

INFO = dataset_utils.DatasetInfo(
    name="mnist",
    splits_to_sizes={"train": 60000, "test": 10000},
    num_classes=10,
    file_pattern="mnist_%s.tfrecord",
    image_shape=(28, 28, 1),
    class_names=("zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                 "nine"),
    items_to_descriptions={
        "image": "A [28 x 28 x 1] grayscale image.",
        "label": "A single integer between 0 and 9",
    },
)

BASE_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"

# split -> (images file, labels file)
_SPLIT_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}

# From tensorflow_datasets/url_checksums/mnist.txt.
SHA256S = {
    "train-images-idx3-ubyte.gz":
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    "train-labels-idx1-ubyte.gz":
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    "t10k-images-idx3-ubyte.gz":
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte.gz":
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}

_IMAGES_MAGIC = 2051
_LABELS_MAGIC = 2049


def read_idx_images(path: str) -> np.ndarray:
    """Reads a gzipped idx3 image file into uint8 [N, rows, cols, 1]."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, count, rows, cols = np.frombuffer(data, dtype=">u4", count=4)
    if magic != _IMAGES_MAGIC or len(data) != 16 + count * rows * cols:
        raise ValueError(f"{path} is not an idx3 image file of {count}x{rows}x{cols}")
    return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(count, rows, cols, 1)


def read_idx_labels(path: str) -> np.ndarray:
    """Reads a gzipped idx1 label file into int64 [N]."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, count = np.frombuffer(data, dtype=">u4", count=2)
    if magic != _LABELS_MAGIC or len(data) != 8 + count:
        raise ValueError(f"{path} is not an idx1 label file of {count} labels")
    return np.frombuffer(data, dtype=np.uint8, offset=8).astype(np.int64)


def output_paths(dataset_dir: str) -> list[str]:
    return [os.path.join(dataset_dir, INFO.file_pattern % split) for split in _SPLIT_FILES]


def download_and_convert(dataset_dir: str, keep_archives: bool = False,
                         base_url: str = BASE_URL,
                         sha256s: Mapping[str, str] = SHA256S) -> None:
    """Downloads the idx files and writes mnist_{train,test}.tfrecord and labels.txt.

    Skips everything if the outputs already exist. base_url and sha256s (file name ->
    sha256) are arguments so tests can serve their own small files.
    """
    if dataset_utils.is_converted(output_paths(dataset_dir), dataset_dir):
        logging.info("MNIST already converted in %s; skipping", dataset_dir)
        return
    os.makedirs(dataset_dir, exist_ok=True)

    downloaded = []  # copies that were there already are not ours to delete
    for split, (images_file, labels_file) in _SPLIT_FILES.items():
        images_path, labels_path = [os.path.join(dataset_dir, name)
                                    for name in (images_file, labels_file)]
        for name, path in ((images_file, images_path), (labels_file, labels_path)):
            if download.fetch_file(base_url + name, path, sha256s[name]):
                downloaded.append(path)
        images = read_idx_images(images_path)
        labels = read_idx_labels(labels_path)
        if len(images) != len(labels):
            raise ValueError(f"{images_path} has {len(images)} images but {labels_path} "
                             f"has {len(labels)} labels")
        dataset_utils.write_tfrecord(os.path.join(dataset_dir, INFO.file_pattern % split),
                                     images, labels)

    # labels.txt last: its presence marks a finished conversion.
    dataset_utils.write_label_file(INFO.labels_to_names(), dataset_dir)
    if not keep_archives:
        for path in downloaded:
            os.remove(path)
    logging.info("Finished converting MNIST into %s", dataset_dir)
