"""Looks datasets up by name: the one entry point for readers and the converter script."""
import dataclasses
import inspect
import os
from typing import Callable, Mapping

import tensorflow as tf

from datasets import cifar10
from datasets import dataset_utils
from datasets import flowers
from datasets import image_folder
from datasets import imagenet
from datasets import mnist
from datasets import shapes
from datasets import tfds_datasets
from datasets import visualwakewords
from core import paths
from core.errors import UsageError

# The registry: each module declares its NAME (or a static INFO), download_and_convert,
# and, when its facts depend on the converted data, load_info(dataset_dir). Adding a
# dataset means adding its module here, nothing else. "tfds:<name>" is any TFDS dataset.
_DATASET_MODULES = {getattr(module, "NAME", None) or module.INFO.name: module
                    for module in (cifar10, flowers, image_folder, imagenet, mnist, shapes,
                                   visualwakewords)}
TFDS_PREFIX = tfds_datasets.PREFIX


def dataset_names() -> tuple[str, ...]:
    return tuple(sorted(_DATASET_MODULES))


def _module(name: str):
    if name and name.startswith(TFDS_PREFIX):
        return tfds_datasets
    if name not in _DATASET_MODULES:
        raise UsageError(f"Unknown dataset name {name!r}; use --dataset_name with one of: "
                         f"{', '.join(dataset_names())}, or {TFDS_PREFIX}<name>[/<config>].")
    return _DATASET_MODULES[name]


def _require_dataset_dir(dataset_dir: str | None) -> None:
    if not dataset_dir:
        raise UsageError("No dataset directory given; pass --dataset_dir=DIR.")


def get_info(name: str, dataset_dir: str | None = None) -> dataset_utils.DatasetInfo:
    """Facts about a dataset (splits, classes, shape). Fixed datasets need no files;
    image_folder and TFDS datasets read them from dataset_dir. A dataset_dir holding
    another dataset is refused: its converter's dataset_info.json names another, or its
    labels.txt a class beyond this one's. Training, evaluation, export and prediction
    all come here for the facts, so all refuse alike."""
    module = _module(name)
    if hasattr(module, "load_info") and not dataset_dir:
        raise UsageError(f"{name} reads its classes and splits from the converted "
                         f"data; pass --dataset_dir=DIR.")
    if module is tfds_datasets:  # dataset_dir is a TFDS data_dir of many datasets
        return module.load_info(name, dataset_dir)
    if dataset_dir:
        _check_recorded_name(name, dataset_dir)
    info = module.load_info(dataset_dir) if hasattr(module, "load_info") else module.INFO
    if dataset_dir:
        _check_labels(name, info, dataset_dir)
    return info


def _check_recorded_name(name: str, dataset_dir: str) -> None:
    """The dataset a converter recorded in dataset_dir's dataset_info.json must be name:
    e.g. an image_folder conversion read as the default --dataset_name=imagenet, whose
    file pattern matches its shards, would train a 1001-class net on it."""
    recorded = (dataset_utils.read_metadata(dataset_dir) or {}).get("name")
    if recorded and recorded != name:
        raise UsageError(f"{dataset_dir} holds the {recorded} dataset (its "
                         f"{dataset_utils.METADATA_FILENAME} says so), not {name}: pass "
                         f"--dataset_name={recorded}.")


def _check_labels(name: str, info: dataset_utils.DatasetInfo, dataset_dir: str) -> None:
    """dataset_dir's labels.txt (when there is one) names no class beyond the dataset's:
    one that does holds another dataset. It may name fewer (ImageNet converted from some
    synsets names those; a file may rename only some classes)."""
    if not dataset_utils.has_labels(dataset_dir):
        return
    labels = dataset_utils.read_label_file(dataset_dir)
    if any(not 0 <= label < info.num_classes for label in labels):
        path = os.path.join(dataset_dir, dataset_utils.LABELS_FILENAME)
        raise UsageError(f"{path} names {len(labels)} classes (ids {min(labels)} to "
                         f"{max(labels)}), but {name} has {info.num_classes}: pass the "
                         f"--dataset_name that {dataset_dir} was converted with.")


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """One split of one dataset on disk, and how to decode its records."""

    name: str
    split_name: str
    file_pattern: str  # Full glob path.
    num_samples: int
    num_classes: int
    labels_to_names: dict[int, str]
    image_shape: tuple
    items_to_descriptions: Mapping[str, str]
    dataset_dir: str
    # serialized record -> {'encoded', 'label', 'bboxes'}; TFDS records differ.
    parse: Callable = dataset_utils.parse_example
    # The split's files when they are listed, not globbed (TFDS); empty: file_pattern.
    files: tuple = ()

    def list_files(self) -> list[str]:
        """The sorted TFRecord files of this split; UsageError if there are none."""
        files = list(self.files) or sorted(tf.io.gfile.glob(self.file_pattern))
        if not files:
            raise UsageError(
                f"No files match {self.file_pattern}; run download_and_convert_data.py "
                f"--dataset_name={self.name} --dataset_dir={self.dataset_dir} first.")
        return files

    def decode(self, serialized_example: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """(uint8 image [H, W, C], int64 label) from one record; fits tf.data map."""
        features = self.parse(serialized_example)
        return self.decode_image(features["encoded"]), features["label"]

    def decode_image(self, encoded: tf.Tensor) -> tf.Tensor:
        return dataset_utils.decode_image(encoded, self.image_shape)


def get_dataset(name: str, split_name: str, dataset_dir: str,
                file_pattern: str | None = None) -> DatasetSpec:
    """Describes split_name of dataset name in dataset_dir.

    file_pattern, like TF-Slim's, overrides the file name template: relative to
    dataset_dir, with %s replaced by the split name.
    """
    _require_dataset_dir(dataset_dir)
    if name and name.startswith(TFDS_PREFIX):
        return DatasetSpec(**tfds_datasets.split_fields(name, split_name, dataset_dir))
    info = get_info(name, dataset_dir)
    if split_name not in info.splits_to_sizes:
        raise UsageError(f"Unknown split {split_name!r} for dataset {name}; use one of: "
                         f"{', '.join(info.splits_to_sizes)}.")
    pattern = file_pattern or info.file_pattern
    if "%s" in pattern:
        pattern = pattern % split_name
    if dataset_utils.has_labels(dataset_dir):
        labels_to_names = dataset_utils.read_label_file(dataset_dir)
    else:
        labels_to_names = info.labels_to_names()
    return DatasetSpec(
        name=name,
        split_name=split_name,
        file_pattern=os.path.join(dataset_dir, pattern),
        num_samples=info.splits_to_sizes[split_name],
        num_classes=info.num_classes,
        labels_to_names=labels_to_names,
        image_shape=tuple(info.image_shape),
        items_to_descriptions=dict(info.items_to_descriptions),
        dataset_dir=dataset_dir,
    )


def download_and_convert(name: str, dataset_dir: str, keep_archives: bool = False,
                         options: dataset_utils.ConvertOptions | None = None) -> None:
    """Downloads (or generates, or reads from options.source_dir) dataset name and writes
    its TFRecords to dataset_dir."""
    if not name:
        raise UsageError(f"No dataset name given; pass --dataset_name with one of: "
                         f"{', '.join(dataset_names())}.")
    module = _module(name)
    _require_dataset_dir(dataset_dir)
    paths.check_output_dir(dataset_dir, "--dataset_dir")  # e.g. a file: one line
    options = options or dataset_utils.ConvertOptions(keep_archives=keep_archives)
    if module is tfds_datasets:
        tfds_datasets.download_and_prepare(name, dataset_dir)
    elif "options" in inspect.signature(module.download_and_convert).parameters:
        module.download_and_convert(dataset_dir, options=options)
    else:
        module.download_and_convert(dataset_dir, keep_archives=options.keep_archives)
