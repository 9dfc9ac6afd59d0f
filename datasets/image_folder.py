"""Your own images: one sub-directory per class, or per split and class -> sharded TFRecords.

    SOURCE/daisy/*.jpg, SOURCE/tulips/*.png, ...  ->  DST/train-00000-of-00002.tfrecord,
    DST/validation-00000-of-00001.tfrecord, DST/labels.txt, DST/dataset_info.json

Class ids follow the sorted sub-directory names. --validation_percentage of each class
(seeded, so re-runs split alike) goes to validation. A source split already, with
SOURCE/train/<class>/ and SOURCE/val/ (or validation/) and SOURCE/test/ beside it, keeps
that split: train, validation and test. Files TensorFlow cannot decode are skipped and
listed in dataset_info.json and the log; JPEGs with an EXIF orientation are turned
upright. Readers take split sizes and class names from dataset_info.json, written last:
its presence marks a finished conversion. source_manifest.json, written first, records
what was read, so a re-run names what changed in SOURCE since.
"""
import dataclasses
import datetime
import glob
import math
import os
import random

from absl import logging

from core.errors import UsageError
from datasets import dataset_utils
from datasets import image_coding
from datasets import source_manifest

NAME = "image_folder"
FILE_PATTERN = "%s-*-of-*.tfrecord"
_SHARD_NAME = "%s-%%05d-of-%%05d.tfrecord"
SPLIT_SEED = 0
_IMAGES_PER_SHARD = 1000  # default shard count: enough files for parallel reading
FORMAT_VERSION = 2
# Top-level directories of a source split already -> the toolkit's split names.
SPLIT_DIRECTORIES = {"train": "train", "val": "validation", "validation": "validation",
                     "test": "test"}
SPLITS = ("train", "validation", "test")


@dataclasses.dataclass(frozen=True)
class Source:
    """What --source_dir holds. files: split -> one sorted file list per class (split
    None: not split yet, --validation_percentage decides)."""
    root: str
    layout: str  # "classes" or "splits"
    class_names: list
    files: dict
    split_directories: dict  # split -> its directory under root ("splits" layout)

    def relative_paths(self) -> list[str]:
        return [os.path.relpath(path, self.root) for per_class in self.files.values()
                for paths in per_class for path in paths]


def _subdirectories(directory: str) -> list[str]:
    return sorted(entry.name for entry in os.scandir(directory)
                  if entry.is_dir() and not entry.name.startswith("."))


def list_files(directory: str) -> list[str]:
    """Every non-hidden file under directory, sorted, so runs see the same order."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
    return found


def read_source(source_dir: str) -> Source:
    """The layout, classes and files of source_dir; UsageError naming the fix if unusable."""
    if not source_dir:
        raise UsageError("image_folder needs the images: pass --source_dir=DIR, a "
                         "directory with one sub-directory of images per class.")
    if not os.path.isdir(source_dir):
        raise UsageError(f"--source_dir={source_dir} is not a directory; pass a directory "
                         f"with one sub-directory of images per class.")
    root = os.path.realpath(source_dir)
    top = _subdirectories(root)
    if not top:
        raise UsageError(f"--source_dir={source_dir} has no class sub-directories; put "
                         f"each class's images in SOURCE/<class name>/.")
    if not all(name in SPLIT_DIRECTORIES for name in top):
        source = Source(root, "classes", top,
                        {None: [list_files(os.path.join(root, name)) for name in top]}, {})
    else:
        source = _read_split_source(source_dir, root, top)
    stray = _files_beside_classes(root, source.split_directories.values())
    if stray:
        logging.warning("Ignored %d file(s) outside the class directories: %s", len(stray),
                        ", ".join(stray[:20]))
    return source


def _files_beside_classes(root: str, split_directories) -> list[str]:
    """Files of the source's top level (and of its split directories), in no class."""
    return [os.path.relpath(os.path.join(directory, entry.name), root)
            for directory in (root, *(os.path.join(root, d) for d in split_directories))
            for entry in sorted(os.scandir(directory), key=lambda e: e.name)
            if entry.is_file() and not entry.name.startswith(".")]


def _read_split_source(source_dir: str, root: str, top: list) -> Source:
    """SOURCE/<split>/<class>/: the classes are train's; another split may lack some."""
    if {"val", "validation"} <= set(top):
        raise UsageError(f"--source_dir={source_dir} has both val/ and validation/; merge "
                         f"them into one.")
    if "train" not in top:
        raise UsageError(f"--source_dir={source_dir} holds {', '.join(top)}/ but no train/; "
                         f"add SOURCE/train/<class name>/ with the training images.")
    directories = {split: name for split in SPLITS for name in top
                   if SPLIT_DIRECTORIES[name] == split}
    classes = {}
    for split, name in directories.items():
        classes[split] = _subdirectories(os.path.join(root, name))
        if not classes[split]:
            raise UsageError(f"{os.path.join(source_dir, name)} has no class "
                             f"sub-directories; put each split's images in "
                             f"SOURCE/{name}/<class name>/.")
    class_names = classes["train"]
    for split, names in classes.items():
        # A class nothing trains on is most often a misspelt one: refuse it.
        unknown = sorted(set(names) - set(class_names))
        if unknown:
            raise UsageError(
                f"{os.path.join(source_dir, directories[split])} has classes that "
                f"train/ lacks ({', '.join(unknown)}); rename them to train/'s classes "
                f"({', '.join(class_names[:10])}{', ...' if len(class_names) > 10 else ''}) "
                f"or add their training images to train/.")
    files = {split: [list_files(os.path.join(root, name, class_name))
                     for class_name in class_names]
             for split, name in directories.items()}
    return Source(root, "splits", class_names, files, directories)


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


def split_items(source: Source, validation_percentage: float) -> dict[str, list]:
    """split -> shuffled (path, label) list."""
    if source.layout == "classes":
        return dict(zip(("train", "validation"),
                        split_stratified(source.files[None], validation_percentage)))
    items = {}
    for split, per_class in source.files.items():
        items[split] = [(path, label) for label, paths in enumerate(per_class)
                        for path in paths]
        random.Random(SPLIT_SEED).shuffle(items[split])
    return items


def _default_shards(num_images: int) -> int:
    return max(1, math.ceil(num_images / _IMAGES_PER_SHARD))


def load_info(dataset_dir: str) -> dataset_utils.DatasetInfo:
    """The DatasetInfo the converter recorded in dataset_dir."""
    metadata = dataset_utils.read_metadata(dataset_dir)
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


def _manifest(source: Source, validation_percentage: float) -> dict:
    return {"source": source.root, "layout": source.layout,
            "validation_percentage": (validation_percentage if source.layout == "classes"
                                      else None),
            "class_names": list(source.class_names),
            "files": source_manifest.snapshot(source.root, source.relative_paths())}


def _difference(dataset_dir: str, recorded: dict, finished: bool, current: dict) -> str | None:
    """Why the conversion in dataset_dir is not current's, in words; None if it is."""
    if recorded["source"] != current["source"]:
        return (f"{dataset_dir} already holds a conversion of {recorded['source']}, not "
                f"{current['source']}")
    if (recorded.get("layout", "classes") == current["layout"] == "classes"
            and recorded.get("validation_percentage") != current["validation_percentage"]):
        return (f"{dataset_dir} already holds a conversion made with "
                f"--validation_percentage={recorded.get('validation_percentage'):g}")
    if "files" not in recorded:  # converted before manifests were recorded
        logging.warning("%s was converted by an older version that recorded no file list: "
                        "changes to %s since cannot be seen; pass --overwrite to convert "
                        "it again.", dataset_dir, current["source"])
        return None
    changed = source_manifest.changes(recorded, current)
    when = "it was converted into" if finished else "the interrupted conversion into"
    return changed and f"{current['source']} changed since {when} {dataset_dir}: {changed}"


def _remove_conversion(dataset_dir: str) -> None:
    """Removes what an earlier image_folder conversion wrote in dataset_dir (only that)."""
    names = [dataset_utils.LABELS_FILENAME, dataset_utils.METADATA_FILENAME,
             source_manifest.FILENAME]
    paths = [os.path.join(dataset_dir, name) for name in names]
    for split in SPLITS:
        pattern = os.path.join(glob.escape(dataset_dir), FILE_PATTERN % split)
        paths += glob.glob(pattern) + glob.glob(pattern + ".incomplete")
    for path in paths:
        if os.path.exists(path):
            os.remove(path)


def _check_destination(dataset_dir: str, source: Source, options) -> bool:
    """Whether dataset_dir holds this conversion, finished (then there is nothing to do);
    refuses another one, or one of a source that changed since, unless --overwrite."""
    metadata = dataset_utils.read_metadata(dataset_dir)
    if metadata is not None and metadata.get("name") != NAME:
        raise UsageError(f"{dataset_dir} holds another dataset ({metadata.get('name')}); "
                         f"choose another --dataset_dir.")
    recorded = source_manifest.read(dataset_dir) or metadata
    if recorded is None:
        return False
    if options.overwrite:
        logging.info("--overwrite: replacing the conversion in %s", dataset_dir)
        _remove_conversion(dataset_dir)
        return False
    difference = _difference(dataset_dir, recorded, metadata is not None,
                             _manifest(source, options.validation_percentage))
    if difference:
        raise UsageError(f"{difference}; pass --overwrite to convert again (replacing it), "
                         f"or choose another --dataset_dir.")
    return metadata is not None


def download_and_convert(dataset_dir: str, options: dataset_utils.ConvertOptions) -> None:
    """Converts options.source_dir into dataset_dir (see the module docstring)."""
    source = read_source(options.source_dir)
    source_dir = source.root
    if os.path.realpath(dataset_dir).startswith(source_dir + os.sep):
        raise UsageError(f"--dataset_dir={dataset_dir} is inside --source_dir; it would "
                         f"be read as a class: choose a directory outside it.")
    if not 0 <= options.validation_percentage < 100:
        raise UsageError(f"--validation_percentage must be in [0, 100), got "
                         f"{options.validation_percentage}.")
    os.makedirs(dataset_dir, exist_ok=True)
    if _check_destination(dataset_dir, source, options):
        logging.info("%s already converted into %s, unchanged; skipping", source_dir,
                     dataset_dir)
        return
    if source.layout == "splits":
        logging.info("%s is split already (%s): converted as those splits; "
                     "--validation_percentage does not apply.", source_dir,
                     ", ".join(f"{d}/ -> {s}" for s, d in source.split_directories.items()))
    source_manifest.write(dataset_dir, _manifest(source, options.validation_percentage))
    class_names = source.class_names
    unreadable, oriented = [], []

    def to_example(item):
        path, label = item
        relative = os.path.relpath(path, source_dir)
        try:
            with open(path, "rb") as f:
                image = image_coding.check_image(f.read(), apply_orientation=True)
        except (OSError, image_coding.UnreadableImage) as error:
            unreadable.append((relative, str(error)))
            return None
        if image.oriented:
            oriented.append(relative)
        return dataset_utils.image_example(
            image.data, image.format.encode(), image.height, image.width, label,
            extra={"image/class/text": dataset_utils.bytes_feature(
                class_names[label].encode()),
                "image/filename": dataset_utils.bytes_feature(relative.encode())})

    shards = {"train": options.train_shards, "validation": options.validation_shards}
    sizes = {}
    for split, items in split_items(source, options.validation_percentage).items():
        sizes[split] = 0
        if items:
            count = min(shards.get(split) or _default_shards(len(items)), len(items))
            paths = dataset_utils.shard_paths(dataset_dir, _SHARD_NAME % split, count)
            sizes[split] = dataset_utils.write_sharded_examples(
                paths, items, to_example, split, options.num_workers)
    if unreadable:
        unreadable.sort()
        logging.warning("Skipped %d file(s) TensorFlow cannot decode (all listed in %s): "
                        "%s", len(unreadable), dataset_utils.METADATA_FILENAME,
                        "; ".join(f"{p} ({why})" for p, why in unreadable[:20]))
    if oriented:
        logging.info("Turned %d JPEG(s) upright by their EXIF orientation (re-encoded at "
                     "quality 100): %s", len(oriented), ", ".join(sorted(oriented)[:20]))
    if not sizes["train"]:
        raise UsageError(f"No readable training images under {source_dir}; put JPEG, PNG, "
                         f"GIF, BMP or WebP files in SOURCE/<class name>/.")

    dataset_utils.write_label_file(dict(enumerate(class_names)), dataset_dir)
    dataset_utils.write_json(os.path.join(dataset_dir, dataset_utils.METADATA_FILENAME), {
        "name": NAME,
        "format_version": FORMAT_VERSION,
        "source": source_dir,
        "layout": source.layout,
        "split_directories": source.split_directories,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
        "class_names": list(class_names),
        "splits": sizes,
        "validation_percentage": (options.validation_percentage
                                  if source.layout == "classes" else None),
        "split_seed": SPLIT_SEED,
        "skipped_files": [{"path": p, "reason": why} for p, why in unreadable],
        "exif_oriented_files": len(oriented),
    })
    logging.info("Finished converting %s into %s: %s", source_dir, dataset_dir, sizes)
