"""TFRecord writer/reader helpers shared by every dataset, in TF-Slim's on-disk format.

Each record is a tf.train.Example with the keys TF-Slim wrote, so data converted by
TF-Slim reads unchanged:
  image/encoded      bytes  PNG (or JPEG) data
  image/format       bytes  b'png' or b'jpeg'
  image/class/label  int64
  image/height       int64
  image/width        int64
"""
import dataclasses
import os
from typing import Mapping, Sequence

import numpy as np
import tensorflow as tf

from core.progress import ProgressBar

LABELS_FILENAME = "labels.txt"


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """Everything known about a dataset before any file is read; one per dataset module."""

    name: str
    splits_to_sizes: Mapping[str, int]
    num_classes: int
    # Relative to dataset_dir, with %s for the split name; may contain glob wildcards.
    file_pattern: str
    image_shape: tuple[int, int, int]
    class_names: tuple[str, ...]
    items_to_descriptions: Mapping[str, str]

    def __post_init__(self):
        if len(self.class_names) != self.num_classes:
            raise ValueError(f"{self.name}: {len(self.class_names)} class names for "
                             f"{self.num_classes} classes")

    def labels_to_names(self) -> dict[int, str]:
        return dict(enumerate(self.class_names))


def int64_feature(values) -> tf.train.Feature:
    if not isinstance(values, (tuple, list)):
        values = [values]
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def bytes_feature(values) -> tf.train.Feature:
    if not isinstance(values, (tuple, list)):
        values = [values]
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def image_to_tfexample(image_data: bytes, image_format: bytes, height: int, width: int,
                       class_id: int) -> tf.train.Example:
    """Builds the tf.train.Example for one encoded image and its label."""
    return tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": bytes_feature(image_data),
        "image/format": bytes_feature(image_format),
        "image/class/label": int64_feature(int(class_id)),
        "image/height": int64_feature(int(height)),
        "image/width": int64_feature(int(width)),
    }))


def write_tfrecord(output_path: str, images: np.ndarray, labels: Sequence[int]) -> None:
    """PNG-encodes uint8 images [N, H, W, C] and writes them with their labels.

    Writes to a temporary name and renames at the end, so a file with the final name
    is always complete (re-runs rely on that to skip finished work).
    """
    images = np.asarray(images, dtype=np.uint8)
    labels = np.asarray(labels, dtype=np.int64)
    if images.ndim != 4 or len(images) != len(labels):
        raise ValueError(f"Expected images [N, H, W, C] and N labels, got "
                         f"{images.shape} and {labels.shape}")
    num_images, height, width, _ = images.shape
    name = os.path.basename(output_path)
    temp_path = output_path + ".incomplete"
    try:
        progress = ProgressBar(name, num_images, unit="images")
        with tf.io.TFRecordWriter(temp_path) as writer:
            for index, (image, label) in enumerate(zip(images, labels)):
                png = tf.io.encode_png(image).numpy()
                example = image_to_tfexample(png, b"png", height, width, label)
                writer.write(example.SerializeToString())
                progress.update(index + 1)
        progress.close()
        tf.io.gfile.rename(temp_path, output_path, overwrite=True)
    finally:
        if tf.io.gfile.exists(temp_path):
            tf.io.gfile.remove(temp_path)


_FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64),
}


def decode_example(serialized_example: tf.Tensor,
                   image_shape: Sequence[int | None]) -> tuple[tf.Tensor, tf.Tensor]:
    """Parses one serialized Example into (uint8 image [H, W, C], int64 label)."""
    features = tf.io.parse_single_example(serialized_example, _FEATURES)
    # decode_image sniffs PNG/JPEG from the bytes, so image/format needs no branch.
    image = tf.io.decode_image(features["image/encoded"], channels=image_shape[-1],
                               dtype=tf.uint8, expand_animations=False)
    # ensure_shape both sets the static shape and fails loudly on a wrong-sized image.
    image = tf.ensure_shape(image, image_shape)
    return image, features["image/class/label"]


def write_label_file(labels_to_class_names: Mapping[int, str], dataset_dir: str,
                     filename: str = LABELS_FILENAME) -> None:
    """Writes lines "<id>:<name>" sorted by id; the file appears only when complete."""
    path = os.path.join(dataset_dir, filename)
    temp_path = path + ".incomplete"
    with tf.io.gfile.GFile(temp_path, "w") as f:
        for label in sorted(labels_to_class_names):
            f.write(f"{label}:{labels_to_class_names[label]}\n")
    tf.io.gfile.rename(temp_path, path, overwrite=True)


def has_labels(dataset_dir: str, filename: str = LABELS_FILENAME) -> bool:
    return tf.io.gfile.exists(os.path.join(dataset_dir, filename))


def is_converted(output_paths: Sequence[str], dataset_dir: str) -> bool:
    """Whether a conversion finished: every output exists and labels.txt, written last."""
    return all(os.path.exists(p) for p in output_paths) and has_labels(dataset_dir)


def read_label_file(dataset_dir: str, filename: str = LABELS_FILENAME) -> dict[int, str]:
    """Reads a labels file written by write_label_file (or by TF-Slim)."""
    with tf.io.gfile.GFile(os.path.join(dataset_dir, filename), "r") as f:
        lines = f.read().splitlines()
    labels_to_class_names = {}
    for line in filter(None, lines):
        # Split at the first colon only: class names may contain colons.
        label, name = line.split(":", 1)
        labels_to_class_names[int(label)] = name
    return labels_to_class_names
