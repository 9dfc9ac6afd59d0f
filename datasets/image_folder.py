"""Your own images: a directory with one sub-directory per class -> sharded TFRecords.

    SOURCE/daisy/*.jpg, SOURCE/tulips/*.png, ...  ->  DST/train-00000-of-00002.tfrecord,
    DST/validation-00000-of-00001.tfrecord, DST/labels.txt, DST/dataset_info.json

Class ids follow the sorted sub-directory names. --validation_percentage of each class
(seeded, so re-runs split alike) goes to validation. Files TensorFlow cannot decode are
skipped and listed in dataset_info.json and the log. Readers take split sizes and class
names from dataset_info.json, written last: its presence marks a finished conversion.
"""
import datetime
import json
import math
import os
import random

from absl import logging
import tensorflow as tf

from core.errors import UsageError
from datasets import dataset_utils
from datasets import image_coding

NAME = "image_folder"
FILE_PATTERN = "%s-*-of-*.tfrecord"
_SHARD_NAME = "%s-%%05d-of-%%05d.tfrecord"
SPLIT_SEED = 0
_IMAGES_PER_SHARD = 1000  # default shard count: enough files for parallel reading
FORMAT_VERSION = 1


def _class_directories(source_dir: str) -> list[str]:
    if not source_dir:
        raise UsageError("image_folder needs the images: pass --source_dir=DIR, a "
                         "directory with one sub-directory of images per class.")
    if not os.path.isdir(source_dir):
        raise UsageError(f"--source_dir={source_dir} is not a directory; pass a directory "
                         f"with one sub-directory of images per class.")
    names = sorted(entry.name for entry in os.scandir(source_dir)
                   if entry.is_dir() and not entry.name.startswith("."))
    if not names:
        raise UsageError(f"--source_dir={source_dir} has no class sub-directories; put "
                         f"each class's images in SOURCE/<class name>/.")
    return names


def _list_files(directory: str) -> list[str]:
    """Every non-hidden file under directory, sorted, so runs see the same order."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
    return found


def split_stratified(files_per_class: list[list], validation_percentage: float,
                     seed: int = SPLIT_SEED) -> tuple[list, list]:
    """(train, validation) lists of (path, label): each class contributes its share of
    validation, rounded, after a seeded shuffle. Training order is shuffled too."""
    rng = random.Random(seed)
    train, validation = [], []
    for label, files in enumerate(files_per_class):
        files = list(files)
        rng.shuffle(files)
        num_validation = int(round(len(files) * validation_percentage / 100.0))
        validation.extend((path, label) for path in files[:num_validation])
        train.extend((path, label) for path in files[num_validation:])
    rng.shuffle(train)
    rng.shuffle(validation)
    return train, validation


def _default_shards(num_images: int) -> int:
    return max(1, math.ceil(num_images / _IMAGES_PER_SHARD))


def _read_metadata(dataset_dir: str) -> dict | None:
    path = os.path.join(dataset_dir, dataset_utils.METADATA_FILENAME)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def load_info(dataset_dir: str) -> dataset_utils.DatasetInfo:
    """The DatasetInfo the converter recorded in dataset_dir."""
    metadata = _read_metadata(dataset_dir)
    if metadata is None or metadata.get("name") != NAME:
        raise UsageError(
            f"No image_folder conversion in {dataset_dir} ({dataset_utils.METADATA_FILENAME} "
            f"is missing); run download_and_convert_data.py --dataset_name=image_folder "
            f"--source_dir=<your images> --dataset_dir={dataset_dir} first.")
    class_names = tuple(metadata["class_names"])
    return dataset_utils.DatasetInfo(
        name=NAME,
        splits_to_sizes={k: v for k, v in metadata["splits"].items() if v},
        num_classes=len(class_names),
        file_pattern=FILE_PATTERN,
        image_shape=(None, None, 3),
        class_names=class_names,
        items_to_descriptions={
            "image": "A color image of varying size.",
            "label": f"A single integer between 0 and {len(class_names) - 1}",
        },
    )


def download_and_convert(dataset_dir: str, options: dataset_utils.ConvertOptions) -> None:
    """Converts options.source_dir into dataset_dir (see the module docstring)."""
    class_names = _class_directories(options.source_dir)
    source_dir = os.path.realpath(options.source_dir)
    if os.path.realpath(dataset_dir).startswith(source_dir + os.sep):
        raise UsageError(f"--dataset_dir={dataset_dir} is inside --source_dir; it would "
                         f"be read as a class: choose a directory outside it.")
    if not 0 <= options.validation_percentage < 100:
        raise UsageError(f"--validation_percentage must be in [0, 100), got "
                         f"{options.validation_percentage}.")
    existing = _read_metadata(dataset_dir)
    if existing is not None:
        wanted = (source_dir, options.validation_percentage)
        if (existing.get("source"), existing.get("validation_percentage")) != wanted:
            raise UsageError(
                f"{dataset_dir} already holds a conversion of {existing.get('source')} with "
                f"--validation_percentage={existing.get('validation_percentage')}; choose "
                f"an empty --dataset_dir or delete that one.")
        logging.info("%s already converted into %s; skipping", source_dir, dataset_dir)
        return
    os.makedirs(dataset_dir, exist_ok=True)

    files_per_class = [_list_files(os.path.join(source_dir, name)) for name in class_names]
    train, validation = split_stratified(files_per_class, options.validation_percentage)
    unreadable = []

    def to_example(item):
        path, label = item
        try:
            with open(path, "rb") as f:
                image = image_coding.check_image(f.read())
        except (OSError, image_coding.UnreadableImage) as error:
            unreadable.append((os.path.relpath(path, source_dir), str(error)))
            return None
        return dataset_utils.image_example(
            image.data, image.format.encode(), image.height, image.width, label,
            extra={"image/class/text": dataset_utils.bytes_feature(
                class_names[label].encode()),
                "image/filename": dataset_utils.bytes_feature(
                    os.path.relpath(path, source_dir).encode())})

    shards = {"train": options.train_shards or _default_shards(len(train)),
              "validation": options.validation_shards or _default_shards(len(validation))}
    sizes = {"train": 0, "validation": 0}
    for split, items in (("train", train), ("validation", validation)):
        if items:
            paths = dataset_utils.shard_paths(dataset_dir, _SHARD_NAME % split,
                                              min(shards[split], len(items)))
            sizes[split] = dataset_utils.write_sharded_examples(
                paths, items, to_example, split, options.num_workers)
    if unreadable:
        unreadable.sort()
        logging.warning("Skipped %d file(s) TensorFlow cannot decode (all listed in %s): "
                        "%s", len(unreadable), dataset_utils.METADATA_FILENAME,
                        "; ".join(f"{p} ({why})" for p, why in unreadable[:20]))
    if not sizes["train"]:
        raise UsageError(f"No readable training images under {source_dir}; put JPEG, PNG, "
                         f"GIF or BMP files in SOURCE/<class name>/.")

    dataset_utils.write_label_file(dict(enumerate(class_names)), dataset_dir)
    dataset_utils.write_json(os.path.join(dataset_dir, dataset_utils.METADATA_FILENAME), {
        "name": NAME,
        "format_version": FORMAT_VERSION,
        "source": source_dir,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
        "class_names": list(class_names),
        "splits": sizes,
        "validation_percentage": options.validation_percentage,
        "split_seed": SPLIT_SEED,
        "skipped_files": [{"path": p, "reason": why} for p, why in unreadable],
    })
    logging.info("Finished converting %s into %s: %s", source_dir, dataset_dir, sizes)
