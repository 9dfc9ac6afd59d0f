"""Visual Wake Words: COCO 2014 images labelled person / not-person, as TF-Slim built it.

--source_dir holds COCO 2014 as downloaded and unzipped:
  train2014/*.jpg, val2014/*.jpg, annotations/instances_{train,val}2014.json
An image is labelled 1 when at least one annotation of --foreground_class_of_interest
covers at least --small_object_area_threshold of the image (the annotation's area, as
TF-Slim); its boxes are those objects. Splits train (100 shards) and val (10 shards),
named train.record-00000-of-00100; labels.txt is 0:background, 1:<class>.
"""
import hashlib
import json
import os

from absl import logging

from core.errors import UsageError
from datasets import dataset_utils
from datasets import image_coding

NAME = "visualwakewords"
_SPLITS = {"train": "train2014", "val": "val2014"}
_DEFAULT_SHARDS = {"train": 100, "val": 10}
_SHARD_NAME = "%s.record-%%05d-of-%%05d"

INFO = dataset_utils.DatasetInfo(
    name=NAME,
    splits_to_sizes={"train": 82783, "val": 40504},
    num_classes=2,
    file_pattern="%s.record-*",
    image_shape=(None, None, 3),
    class_names=("background", "person"),
    items_to_descriptions={
        "image": "A color image of varying height and width.",
        "label": "The label id of the image, an integer in {0, 1}",
        "object/bbox": "A list of bounding boxes.",
    },
)


def label_image(image: dict, annotations: list, category_id: int,
                small_object_area_threshold: float) -> tuple[int, list]:
    """(label, boxes [ymin, xmin, ymax, xmax] in [0, 1]) of one COCO image."""
    width, height = image["width"], image["height"]
    large = [a for a in annotations if int(a["category_id"]) == category_id
             and a["area"] / (width * height) >= small_object_area_threshold]
    boxes = []
    for annotation in large:
        x, y, box_width, box_height = annotation["bbox"]
        # Degenerate boxes, or boxes past the image, are dropped as TF-Slim did.
        if box_width <= 0 or box_height <= 0 or x + box_width > width or \
                y + box_height > height:
            continue
        boxes.append([y / height, x / width, (y + box_height) / height,
                      (x + box_width) / width])
    return (1 if large else 0), boxes


def _load_annotations(path: str, foreground: str):
    if not os.path.exists(path):
        raise UsageError(f"{path} is missing; point --source_dir at COCO 2014 with "
                         f"annotations/instances_train2014.json and instances_val2014.json.")
    with open(path) as f:
        coco = json.load(f)
    ids = [c["id"] for c in coco["categories"] if c["name"] == foreground]
    if not ids:
        names = sorted(c["name"] for c in coco["categories"])
        raise UsageError(f"--foreground_class_of_interest={foreground} is not a COCO "
                         f"category; use one of: {', '.join(names)}.")
    by_image = {}
    for annotation in coco.get("annotations", []):
        by_image.setdefault(annotation["image_id"], []).append(annotation)
    return coco["images"], by_image, ids[0]


def download_and_convert(dataset_dir: str, options: dataset_utils.ConvertOptions) -> None:
    if not options.source_dir:
        raise UsageError("visualwakewords needs COCO 2014: pass --source_dir=DIR with "
                         "train2014/, val2014/ and annotations/.")
    shards = {"train": options.train_shards or _DEFAULT_SHARDS["train"],
              "val": options.validation_shards or _DEFAULT_SHARDS["val"]}
    outputs = [path for split, count in shards.items()
               for path in dataset_utils.shard_paths(dataset_dir, _SHARD_NAME % split, count)]
    if dataset_utils.is_converted(outputs, dataset_dir):
        logging.info("Visual Wake Words already converted in %s; skipping", dataset_dir)
        return
    os.makedirs(dataset_dir, exist_ok=True)
    foreground = options.foreground_class_of_interest
    unreadable = []
    for split, coco_name in _SPLITS.items():
        images, by_image, category_id = _load_annotations(os.path.join(
            options.source_dir, "annotations", f"instances_{coco_name}.json"), foreground)
        image_dir = os.path.join(options.source_dir, coco_name)

        def to_example(image, image_dir=image_dir, by_image=by_image,
                       category_id=category_id):
            path = os.path.join(image_dir, image["file_name"])
            try:
                with open(path, "rb") as f:
                    data = f.read()
                checked = image_coding.as_rgb_jpeg(data)
            except (OSError, image_coding.UnreadableImage) as error:
                unreadable.append(f"{image['file_name']} ({error})")
                return None
            label, boxes = label_image(image, by_image.get(image["id"], []), category_id,
                                       options.small_object_area_threshold)
            feature = dataset_utils.bytes_feature
            return dataset_utils.image_example(
                checked.data, b"jpeg", checked.height, checked.width, label, bboxes=boxes,
                extra={"image/filename": feature(image["file_name"].encode()),
                       "image/source_id": feature(str(image["id"]).encode()),
                       "image/key/sha256": feature(
                           hashlib.sha256(checked.data).hexdigest().encode())})

        paths = dataset_utils.shard_paths(dataset_dir, _SHARD_NAME % split, shards[split])
        dataset_utils.write_sharded_examples(paths, images, to_example, split,
                                             options.num_workers)
    if unreadable:
        logging.warning("Skipped %d file(s): %s", len(unreadable), "; ".join(unreadable))
    dataset_utils.write_label_file({0: "background", 1: foreground}, dataset_dir)
