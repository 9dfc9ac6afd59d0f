"""Visual Wake Words from a small COCO-format source, through the real converter."""
import json

import numpy as np
import pytest
import tensorflow as tf
from helpers.testing_utils import encoded_image

from core.errors import UsageError
from datasets import dataset_factory, dataset_utils

CATEGORIES = [{"id": 1, "name": "person"}, {"id": 18, "name": "dog"}]


@pytest.fixture
def coco_source(tmp_path):
    source = tmp_path / "coco"
    (source / "annotations").mkdir(parents=True)
    for split in ("train2014", "val2014"):
        (source / split).mkdir()
        images, annotations = [], []
        for index in range(4):
            name = f"COCO_{split}_{index:012d}.jpg"
            (source / split / name).write_bytes(encoded_image(20, 50, seed=index))
            images.append({"id": index, "file_name": name, "width": 50, "height": 20})
        # 0: a large person (label 1); 1: a person below the threshold (label 0);
        # 2: a large dog only (label 0); 3: no annotation (label 0).
        annotations = [
            {"id": 10, "image_id": 0, "category_id": 1, "area": 200.0,
             "bbox": [5.0, 2.0, 20.0, 10.0]},
            {"id": 11, "image_id": 1, "category_id": 1, "area": 4.0,
             "bbox": [1.0, 1.0, 2.0, 2.0]},
            {"id": 12, "image_id": 2, "category_id": 18, "area": 500.0,
             "bbox": [0.0, 0.0, 25.0, 20.0]},
        ]
        (source / "annotations" / f"instances_{split}.json").write_text(json.dumps(
            {"images": images, "annotations": annotations, "categories": CATEGORIES}))
    return source


def _convert(source, out, **options):
    dataset_factory.download_and_convert("visualwakewords", str(out), options=(
        dataset_utils.ConvertOptions(source_dir=str(source), train_shards=2,
                                     validation_shards=1, **options)))


def test_person_rule_threshold_and_boxes(coco_source, tmp_path):
    out = tmp_path / "vww"
    _convert(coco_source, out)
    assert (out / "labels.txt").read_text() == "0:background\n1:person\n"
    for split, shards in (("train", 2), ("val", 1)):
        spec = dataset_factory.get_dataset("visualwakewords", split, str(out))
        files = spec.list_files()
        assert len(files) == shards
        examples = {}
        for record in tf.data.TFRecordDataset(files):
            parsed = spec.parse(record)
            example = tf.train.Example.FromString(record.numpy())
            source_id = example.features.feature["image/source_id"].bytes_list.value[0]
            examples[int(source_id)] = (int(parsed["label"]), parsed["bboxes"].numpy())
        assert {k: v[0] for k, v in examples.items()} == {0: 1, 1: 0, 2: 0, 3: 0}
        np.testing.assert_allclose(examples[0][1], [[0.1, 0.1, 0.6, 0.5]], rtol=1e-6)
        assert examples[1][1].shape == (0, 4)


def test_threshold_flag_changes_the_rule(coco_source, tmp_path):
    out = tmp_path / "vww"
    _convert(coco_source, out, small_object_area_threshold=0.001)
    spec = dataset_factory.get_dataset("visualwakewords", "val", str(out))
    labels = sorted(int(spec.parse(r)["label"])
                    for r in tf.data.TFRecordDataset(spec.list_files()))
    assert labels == [0, 0, 1, 1]  # the small person (4 / 1000 px) now counts


def test_unknown_foreground_class_lists_the_categories(coco_source, tmp_path):
    with pytest.raises(UsageError, match="use one of: dog, person"):
        _convert(coco_source, tmp_path / "vww", foreground_class_of_interest="unicorn")
