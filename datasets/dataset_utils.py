"""TFRecord writer/reader helpers shared by every dataset, in TF-Slim's on-disk format.

Each record is a tf.train.Example with the keys TF-Slim wrote, so data converted by
TF-Slim reads unchanged:
  image/encoded      bytes  PNG (or JPEG) data
  image/format       bytes  b'png' or b'jpeg'
  image/class/label  int64
  image/height       int64
  image/width        int64
"""
import concurrent.futures
import dataclasses
import json
import os
import threading
from typing import Mapping, Sequence

from absl import logging
import numpy as np
import tensorflow as tf

from core import paths
from core.errors import DataError
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


def decode_example(serialized_example: tf.Tensor,
                   image_shape: Sequence[int | None]) -> tuple[tf.Tensor, tf.Tensor]:
    """Parses one serialized Example into (uint8 image [H, W, C], int64 label)."""
    features = parse_example(serialized_example)
    return decode_image(features["encoded"], image_shape), features["label"]


def label_file_text(labels_to_class_names: Mapping[int, str]) -> str:
    """Lines "<id>:<name>" sorted by id: what write_label_file writes."""
    return "".join(f"{label}:{labels_to_class_names[label]}\n"
                   for label in sorted(labels_to_class_names))


def write_label_file(labels_to_class_names: Mapping[int, str], dataset_dir: str,
                     filename: str = LABELS_FILENAME, replace: bool = False) -> None:
    """Writes lines "<id>:<name>" sorted by id; the file appears only when complete.

    A file already there with other lines (the user's edits, or not ours at all) is
    renamed to '<filename>.replaced' first, unless replace.
    """
    path = os.path.join(dataset_dir, filename)
    text = label_file_text(labels_to_class_names)
    if not replace and not paths.is_remote(path) and os.path.isfile(path):
        with open(path) as f:
            if f.read() == text:
                return
        logging.warning("%s holds other class names than this conversion's; kept as %s",
                        path, paths.set_aside(path, ".replaced"))
    temp_path = path + ".incomplete"
    with tf.io.gfile.GFile(temp_path, "w") as f:
        f.write(text)
    tf.io.gfile.rename(temp_path, path, overwrite=True)


def has_labels(dataset_dir: str, filename: str = LABELS_FILENAME) -> bool:
    return tf.io.gfile.exists(os.path.join(dataset_dir, filename))


def is_converted(output_paths: Sequence[str], dataset_dir: str) -> bool:
    """Whether a conversion finished: every output exists and labels.txt, written last."""
    return all(os.path.exists(p) for p in output_paths) and has_labels(dataset_dir)


def read_label_file(dataset_dir: str, filename: str = LABELS_FILENAME) -> dict[int, str]:
    """Reads a labels file written by write_label_file (or by TF-Slim): 'label:name' lines.

    A malformed line is a DataError naming the file, the line and the fix.
    """
    path = os.path.join(dataset_dir, filename)
    with tf.io.gfile.GFile(path, "r") as f:
        lines = f.read().splitlines()
    labels_to_class_names = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        # Split at the first colon only: class names may contain colons.
        label, colon, name = line.partition(":")
        if not colon or not label.strip().lstrip("-").isdigit():
            raise DataError(f"{path} line {number} is {line[:80]!r}, not 'label:name' "
                            f"(e.g. '0:daisy'); fix the line, or delete the file to use "
                            f"the dataset's built-in class names.")
        labels_to_class_names[int(label)] = name
    return labels_to_class_names


def float_feature(values) -> tf.train.Feature:
    if not isinstance(values, (tuple, list)):
        values = [values]
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


BBOX_KEYS = ("ymin", "xmin", "ymax", "xmax")  # the order tf.image's box ops use


def image_example(image_data: bytes, image_format: bytes, height: int, width: int,
                  class_id: int, extra: Mapping[str, tf.train.Feature] | None = None,
                  bboxes: Sequence[Sequence[float]] = ()) -> tf.train.Example:
    """image_to_tfexample plus optional features, e.g. image/class/text, and boxes.

    bboxes are [ymin, xmin, ymax, xmax] in [0, 1], written as TF-Slim's
    image/object/bbox/{ymin,xmin,ymax,xmax} float lists.
    """
    example = image_to_tfexample(image_data, image_format, height, width, class_id)
    feature = example.features.feature
    for key, value in (extra or {}).items():
        feature[key].CopyFrom(value)
    if bboxes:
        for index, key in enumerate(BBOX_KEYS):
            feature[f"image/object/bbox/{key}"].CopyFrom(
                float_feature([float(box[index]) for box in bboxes]))
    return example


def shard_paths(dataset_dir: str, name_template: str, num_shards: int) -> list[str]:
    """name_template has two %d: shard index and shard count."""
    return [os.path.join(dataset_dir, name_template % (index, num_shards))
            for index in range(num_shards)]


def write_sharded_examples(paths: Sequence[str], items: Sequence, to_example,
                           label: str, num_workers: int | None = None) -> int:
    """Writes items into len(paths) shards of contiguous ranges, shards in parallel.

    to_example(item) returns a tf.train.Example, or None to leave the item out (the
    caller has already listed it). Each shard is written under a temporary name and
    renamed when complete; a shard that already exists is kept, so an interrupted
    conversion resumes where it stopped. Returns the number of records in all shards.
    """
    num_shards = len(paths)
    per_shard = -(-len(items) // num_shards) if items else 0  # ceil, as TF-Slim split
    ranges = [items[i * per_shard:(i + 1) * per_shard] for i in range(num_shards)]
    todo = [(path, part) for path, part in zip(paths, ranges) if not os.path.exists(path)]
    progress = ProgressBar(label, sum(len(part) for _, part in todo), unit="images")
    lock = threading.Lock()
    done = [0]

    def write(path, part):
        temp_path = path + ".incomplete"
        written = 0
        try:
            with tf.io.TFRecordWriter(temp_path) as writer:
                for item in part:
                    example = to_example(item)
                    if example is not None:
                        writer.write(example.SerializeToString())
                        written += 1
                    with lock:
                        done[0] += 1
                        progress.update(done[0])
            tf.io.gfile.rename(temp_path, path, overwrite=True)
        finally:
            if tf.io.gfile.exists(temp_path):
                tf.io.gfile.remove(temp_path)
        return written

    # TensorFlow's decode/encode ops release the GIL, so threads use every core.
    workers = num_workers or os.cpu_count() or 1
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(write, path, part) for path, part in todo]
        total = sum(future.result() for future in futures)
    progress.close()
    kept = [path for path in paths if path not in {p for p, _ in todo}]
    return total + sum(count_records(path) for path in kept)


def count_records(path: str) -> int:
    return int(tf.data.TFRecordDataset(path).reduce(0, lambda count, _: count + 1))


_EXAMPLE_FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    **{f"image/object/bbox/{key}": tf.io.VarLenFeature(tf.float32) for key in BBOX_KEYS},
}


def parse_example(serialized_example: tf.Tensor) -> dict:
    """{'encoded': bytes, 'label': int64, 'bboxes': float32 [N, 4] ymin, xmin, ymax, xmax}."""
    features = tf.io.parse_single_example(serialized_example, _EXAMPLE_FEATURES)
    bboxes = tf.stack([tf.sparse.to_dense(features[f"image/object/bbox/{key}"])
                       for key in BBOX_KEYS], axis=1)
    return {"encoded": features["image/encoded"], "label": features["image/class/label"],
            "bboxes": bboxes}


def decode_image(encoded: tf.Tensor, image_shape: Sequence[int | None]) -> tf.Tensor:
    """uint8 [H, W, C] from PNG/JPEG/GIF/BMP bytes; the static shape set to image_shape."""
    image = tf.io.decode_image(encoded, channels=image_shape[-1], dtype=tf.uint8,
                               expand_animations=False)
    return tf.ensure_shape(image, image_shape)


def write_json(path: str, content) -> None:
    """Writes JSON atomically: the file appears only when complete."""
    with tf.io.gfile.GFile(path + ".incomplete", "w") as f:
        json.dump(content, f, indent=2, sort_keys=True)
        f.write("\n")
    tf.io.gfile.rename(path + ".incomplete", path, overwrite=True)


@dataclasses.dataclass(frozen=True)
class ConvertOptions:
    """What a converter may need beyond dataset_dir; each uses the fields it knows."""

    keep_archives: bool = False
    source_dir: str | None = None            # user-provided data (image_folder, imagenet, ...)
    validation_percentage: float = 10.0      # image_folder
    train_shards: int | None = None          # None: the dataset's own default
    validation_shards: int | None = None
    bounding_boxes: str | None = None        # imagenet: annotation archive or directory
    small_object_area_threshold: float = 0.005   # visualwakewords
    foreground_class_of_interest: str = "person"
    num_workers: int | None = None           # parallel encoders; default: every core
    overwrite: bool = False                  # image_folder: convert a changed source again


METADATA_FILENAME = "dataset_info.json"


def read_metadata(dataset_dir: str) -> dict | None:
    """The dataset_info.json a converter wrote in dataset_dir (its "name" says which
    dataset the directory holds); None if there is none."""
    path = os.path.join(dataset_dir, METADATA_FILENAME)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)
