"""Flowers: 3,670 photos of 5 flower types, converted as TF-Slim's download_and_convert_flowers.

Source: http://download.tensorflow.org/example_images/flower_photos.tgz
(flower_photos/<class>/*.jpg). 350 photos, chosen by a shuffle seeded with 0, are the
validation split; the rest train. 5 shards per split, JPEG bytes unchanged, image/format
b'jpg' as TF-Slim wrote it. Unlike TF-Slim, files are listed in sorted order before the
shuffle (os.listdir order varies between machines), so every machine splits alike.
"""
import os
import random
import shutil
import tempfile

from absl import logging

from core.errors import UsageError
from datasets import dataset_utils
from datasets import download
from datasets import image_coding

INFO = dataset_utils.DatasetInfo(
    name="flowers",
    splits_to_sizes={"train": 3320, "validation": 350},
    num_classes=5,
    file_pattern="flowers_%s_*.tfrecord",
    image_shape=(None, None, 3),
    class_names=("daisy", "dandelion", "roses", "sunflowers", "tulips"),
    items_to_descriptions={
        "image": "A color image of varying size.",
        "label": "A single integer between 0 and 4",
    },
)

DATA_URL = "http://download.tensorflow.org/example_images/flower_photos.tgz"
# From tensorflow_datasets/datasets/tf_flowers/checksums.tsv.
SHA256 = "4c54ace7911aaffe13a365c34f650e71dd5bf1be0a58b464e5a7183e3e595d9c"
NUM_VALIDATION = 350
RANDOM_SEED = 0
NUM_SHARDS = 5
_SHARD_NAME = "flowers_%s_%%05d-of-%%05d.tfrecord"
_ARCHIVE_ROOT = "flower_photos"


def output_paths(dataset_dir: str) -> list[str]:
    return [path for split in ("train", "validation")
            for path in dataset_utils.shard_paths(dataset_dir, _SHARD_NAME % split,
                                                  NUM_SHARDS)]


def split_files(photo_root: str, num_validation: int = NUM_VALIDATION):
    """(class_names, train, validation): lists of (path, label), split as TF-Slim did."""
    class_names = sorted(entry.name for entry in os.scandir(photo_root) if entry.is_dir())
    photos = [(os.path.join(photo_root, name, filename), label)
              for label, name in enumerate(class_names)
              for filename in sorted(os.listdir(os.path.join(photo_root, name)))]
    random.Random(RANDOM_SEED).shuffle(photos)
    return class_names, photos[num_validation:], photos[:num_validation]


def download_and_convert(dataset_dir: str, options: dataset_utils.ConvertOptions,
                         url: str = DATA_URL, sha256: str = SHA256,
                         num_validation: int = NUM_VALIDATION) -> None:
    """Downloads flower_photos.tgz (or reuses a verified copy) and writes the shards.

    url, sha256 and num_validation are arguments so tests can use a small archive.
    """
    if dataset_utils.is_converted(output_paths(dataset_dir), dataset_dir):
        logging.info("Flowers already converted in %s; skipping", dataset_dir)
        return
    os.makedirs(dataset_dir, exist_ok=True)
    archive = os.path.join(dataset_dir, "flower_photos.tgz")
    downloaded = download.fetch_file(url, archive, sha256)
    extract_dir = tempfile.mkdtemp(dir=dataset_dir, prefix="flowers_extract_")
    unreadable = []

    def to_example(item):
        path, label = item
        with open(path, "rb") as f:
            data = f.read()
        try:
            image = image_coding.check_image(data)
        except image_coding.UnreadableImage as error:
            unreadable.append(f"{os.path.relpath(path, extract_dir)} ({error})")
            return None
        return dataset_utils.image_to_tfexample(image.data, b"jpg", image.height,
                                                image.width, label)

    try:
        download.extract_tar(archive, extract_dir)
        photo_root = os.path.join(extract_dir, _ARCHIVE_ROOT)
        if not os.path.isdir(photo_root):
            raise UsageError(f"{archive} has no {_ARCHIVE_ROOT}/ directory; delete it and "
                             f"run again to download it afresh.")
        class_names, train, validation = split_files(photo_root, num_validation)
        for split, items in (("train", train), ("validation", validation)):
            paths = dataset_utils.shard_paths(dataset_dir, _SHARD_NAME % split, NUM_SHARDS)
            dataset_utils.write_sharded_examples(paths, items, to_example, split,
                                                 options.num_workers)
    finally:
        shutil.rmtree(extract_dir)
    if unreadable:
        logging.warning("Skipped %d unreadable file(s): %s", len(unreadable),
                        "; ".join(sorted(unreadable)))
    dataset_utils.write_label_file(dict(enumerate(class_names)), dataset_dir)
    if downloaded and not options.keep_archives:  # a copy that was there is not ours
        os.remove(archive)
    logging.info("Finished converting Flowers into %s", dataset_dir)
