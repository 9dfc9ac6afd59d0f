"""ImageNet (ILSVRC2012) from the archives you downloaded with your account.

--source_dir holds, as downloaded or extracted:
  ILSVRC2012_img_train.tar (one nXXXXXXXX.tar per synset) or train/nXXXXXXXX/*.JPEG
  ILSVRC2012_img_val.tar or val/*.JPEG (flat; or val/nXXXXXXXX/*.JPEG, already sorted)
  imagenet_2012_validation_synset_labels.txt  the synset of each validation image in
                                              file-name order (TF-Slim's file; needed
                                              for a flat val/)
  imagenet_metadata.txt (optional)            "<synset>\t<human-readable name>" lines;
                                              without it the shipped names are used
--bounding_boxes: ILSVRC2012_bbox_train_v2.tar.gz or its directory of XML files.

As TF-Slim's build_imagenet_data: synsets in sorted order are labels 1..1000, 0 is
background; each split shuffled with seed 12345; 1024 train and 128 validation shards
named train-00000-of-01024; CMYK JPEGs and PNGs (or WebPs) named .JPEG re-encoded as
RGB JPEG; the same feature keys, boxes as image/object/bbox/{xmin,ymin,xmax,ymax} in
[0, 1].

data/imagenet_classes.txt ships the 1000 synsets, sorted, each with its WordNet words
(the lines of TF-Slim's imagenet_metadata.txt for these synsets), so the class names
of INFO, and so of exports and evaluation reports, read "tench, Tinca tinca", not
"class_1", without any file from the user.
"""
import glob
import os
import random
import re
import shutil
import tempfile
import xml.etree.ElementTree as ElementTree

from absl import logging

from core.errors import UsageError
from datasets import dataset_utils
from datasets import download
from datasets import image_coding

NAME = "imagenet"
NUM_CLASSES = 1001  # 1000 synsets + background
_SHUFFLE_SEED = 12345
_DEFAULT_SHARDS = {"train": 1024, "validation": 128}
_SHARD_NAME = "%s-%%05d-of-%%05d"
_VALIDATION_LABELS = "imagenet_2012_validation_synset_labels.txt"
_METADATA = "imagenet_metadata.txt"
_SYNSET = re.compile(r"^n\d{8}$")
CLASSES_FILE = os.path.join(os.path.dirname(__file__), "data", "imagenet_classes.txt")


def synset_words() -> dict[str, str]:
    """{synset: human-readable words} of the 1000 ILSVRC-2012 classes, in label order
    (label 1 is the first; 0 is background)."""
    with open(CLASSES_FILE, encoding="utf-8") as f:
        return dict(line.rstrip("\n").split("\t", 1) for line in f if line.strip())


INFO = dataset_utils.DatasetInfo(
    name=NAME,
    splits_to_sizes={"train": 1281167, "validation": 50000},
    num_classes=NUM_CLASSES,
    file_pattern="%s-*",
    image_shape=(None, None, 3),
    class_names=("background",) + tuple(synset_words().values()),
    items_to_descriptions={
        "image": "A color image of varying height and width.",
        "label": "The label id of the image, integer between 0 and 1000",
        "label_text": "The text of the label.",
        "object/bbox": "A list of bounding boxes.",
        "object/label": "A list of labels, one per each object.",
    },
)


def _synset_images(directory: str) -> list[tuple[str, str]]:
    """(path, synset) for directory/nXXXXXXXX/*.JPEG."""
    return [(path, synset) for synset in sorted(os.listdir(directory))
            if _SYNSET.match(synset)
            for path in sorted(glob.glob(os.path.join(directory, synset, "*")))]


def _train_images(source_dir: str, work_dir: str) -> list[tuple[str, str]]:
    train_dir = os.path.join(source_dir, "train")
    if not os.path.isdir(train_dir):
        archive = os.path.join(source_dir, "ILSVRC2012_img_train.tar")
        if not os.path.exists(archive):
            raise UsageError(f"{source_dir} has neither train/ nor ILSVRC2012_img_train.tar; "
                             f"point --source_dir at the directory holding them.")
        train_dir = os.path.join(work_dir, "train")
        download.extract_tar(archive, train_dir)
        for inner in sorted(glob.glob(os.path.join(train_dir, "n*.tar"))):
            download.extract_tar(inner, inner[:-len(".tar")])
            os.remove(inner)
    return _synset_images(train_dir)


def _validation_images(source_dir: str, work_dir: str) -> list[tuple[str, str]]:
    val_dir = os.path.join(source_dir, "val")
    if not os.path.isdir(val_dir):
        archive = os.path.join(source_dir, "ILSVRC2012_img_val.tar")
        if not os.path.exists(archive):
            return []
        val_dir = os.path.join(work_dir, "val")
        download.extract_tar(archive, val_dir)
    sorted_into_synsets = _synset_images(val_dir)
    if sorted_into_synsets:
        return sorted_into_synsets
    files = sorted(f for f in os.listdir(val_dir) if f.upper().endswith(".JPEG"))
    labels_path = os.path.join(source_dir, _VALIDATION_LABELS)
    if not os.path.exists(labels_path):
        raise UsageError(f"The validation images need their synsets: put TF-Slim's "
                         f"{_VALIDATION_LABELS} (one synset per image, in file-name order) "
                         f"in {source_dir}.")
    with open(labels_path) as f:
        synsets = f.read().split()
    if len(synsets) != len(files):
        raise UsageError(f"{labels_path} lists {len(synsets)} synsets for {len(files)} "
                         f"validation images; use the file matching these images.")
    return [(os.path.join(val_dir, name), synset) for name, synset in zip(files, synsets)]


def _human_names(source_dir: str, synsets: list[str]) -> dict[str, str]:
    """The shipped words, overridden by an imagenet_metadata.txt in source_dir; a synset
    of neither (not an ILSVRC-2012 class) keeps its id."""
    names = synset_words()
    path = os.path.join(source_dir, _METADATA)
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                synset, _, name = line.rstrip("\n").partition("\t")
                names[synset] = name
    unnamed = [synset for synset in synsets if synset not in names]
    if unnamed:
        logging.warning("%d synset(s) without a name (e.g. %s): labels.txt gets their ids.",
                        len(unnamed), unnamed[0])
    return {synset: names.get(synset, synset) for synset in synsets}


def parse_bounding_boxes(xml_text: str, synset: str) -> list[list[float]]:
    """Boxes [ymin, xmin, ymax, xmax] in [0, 1] of one annotation file, for its own
    synset only (as TF-Slim's process_bounding_boxes), clipped to the image."""
    root = ElementTree.fromstring(xml_text)
    width = float(root.findtext("size/width"))
    height = float(root.findtext("size/height"))
    boxes = []
    for obj in root.iter("object"):
        if obj.findtext("name") != synset:
            continue
        box = obj.find("bndbox")
        xmin, xmax = (float(box.findtext(k)) / width for k in ("xmin", "xmax"))
        ymin, ymax = (float(box.findtext(k)) / height for k in ("ymin", "ymax"))
        xmin, xmax = sorted((min(max(xmin, 0.0), 1.0), min(max(xmax, 0.0), 1.0)))
        ymin, ymax = sorted((min(max(ymin, 0.0), 1.0), min(max(ymax, 0.0), 1.0)))
        boxes.append([ymin, xmin, ymax, xmax])
    return boxes


def _annotation_files(bounding_boxes: str | None, work_dir: str) -> dict[str, str]:
    """Image file stem -> XML path."""
    if not bounding_boxes:
        return {}
    directory = bounding_boxes
    if not os.path.isdir(bounding_boxes):
        if not os.path.exists(bounding_boxes):
            raise UsageError(f"--bounding_boxes={bounding_boxes} does not exist; pass "
                             f"ILSVRC2012_bbox_train_v2.tar.gz or its extracted directory.")
        directory = os.path.join(work_dir, "bounding_boxes")
        download.extract_tar(bounding_boxes, directory)
    return {os.path.splitext(os.path.basename(path))[0]: path
            for path in glob.glob(os.path.join(directory, "**", "*.xml"), recursive=True)}


def download_and_convert(dataset_dir: str, options: dataset_utils.ConvertOptions) -> None:
    if not options.source_dir:
        raise UsageError("ImageNet cannot be downloaded without an account: download the "
                         "ILSVRC2012 archives and pass --source_dir=<their directory>.")
    shards = {"train": options.train_shards or _DEFAULT_SHARDS["train"],
              "validation": options.validation_shards or _DEFAULT_SHARDS["validation"]}
    outputs = [path for split, count in shards.items()
               for path in dataset_utils.shard_paths(dataset_dir, _SHARD_NAME % split, count)]
    if dataset_utils.is_converted(outputs, dataset_dir):
        logging.info("ImageNet already converted in %s; skipping", dataset_dir)
        return
    os.makedirs(dataset_dir, exist_ok=True)
    work_dir = tempfile.mkdtemp(dir=dataset_dir, prefix="imagenet_extract_")
    try:
        splits = {"train": _train_images(options.source_dir, work_dir),
                  "validation": _validation_images(options.source_dir, work_dir)}
        synsets = sorted({synset for _, synset in splits["train"]})
        if not synsets:
            raise UsageError(f"No training images found under {options.source_dir}.")
        labels = {synset: index + 1 for index, synset in enumerate(synsets)}
        names = _human_names(options.source_dir, synsets)
        annotations = _annotation_files(options.bounding_boxes, work_dir)
        reencoded, unreadable = [], []

        def to_example(item):
            path, synset = item
            with open(path, "rb") as f:
                data = f.read()
            try:
                if image_coding.sniff_format(data) == "webp":  # RGBA WebP: alpha dropped
                    data = image_coding.check_image(data).data
                image = image_coding.as_rgb_jpeg(data)
            except image_coding.UnreadableImage as error:
                unreadable.append(f"{os.path.basename(path)} ({error})")
                return None
            if image.reencoded:
                reencoded.append(os.path.basename(path))
            stem = os.path.splitext(os.path.basename(path))[0]
            boxes = []
            if stem in annotations:
                with open(annotations[stem]) as f:
                    boxes = parse_bounding_boxes(f.read(), synset)
            label = labels.get(synset)
            if label is None:
                unreadable.append(f"{os.path.basename(path)} (synset {synset} has no "
                                  f"training images)")
                return None
            feature = dataset_utils.bytes_feature
            extra = {
                "image/colorspace": feature(b"RGB"),
                "image/channels": dataset_utils.int64_feature(3),
                "image/class/synset": feature(synset.encode()),
                "image/class/text": feature(names[synset].encode()),
                "image/filename": feature(os.path.basename(path).encode()),
                "image/object/bbox/label": dataset_utils.int64_feature([label] * len(boxes)),
            }
            return dataset_utils.image_example(image.data, b"JPEG", image.height,
                                               image.width, label, extra=extra,
                                               bboxes=boxes)

        for split, items in splits.items():
            random.Random(_SHUFFLE_SEED).shuffle(items)
            if items:
                paths = dataset_utils.shard_paths(dataset_dir, _SHARD_NAME % split,
                                                  shards[split])
                count = dataset_utils.write_sharded_examples(paths, items, to_example,
                                                             split, options.num_workers)
                logging.info("Finished writing all %d images in data set (%s).", count,
                             split)
    finally:
        shutil.rmtree(work_dir)
    if reencoded:
        logging.info("Re-encoded %d CMYK or non-JPEG file(s) as RGB JPEG: %s",
                     len(reencoded), ", ".join(sorted(reencoded)[:20]))
    if unreadable:
        logging.warning("Skipped %d file(s): %s", len(unreadable), "; ".join(unreadable))
    dataset_utils.write_label_file(
        {0: "background", **{labels[s]: names[s] for s in synsets}}, dataset_dir)
