"""image_folder: class sub-directories -> shards + labels.txt + dataset_info.json."""
import collections
import json

import numpy as np
import pytest
from helpers.scripts import run_script

from core.errors import UsageError
from datasets import dataset_factory, dataset_utils, image_folder


def _convert(source, destination, **options):
    dataset_factory.download_and_convert(
        "image_folder", str(destination),
        options=dataset_utils.ConvertOptions(source_dir=str(source), **options))


def test_converts_splits_lists_unreadable_files_and_reads_back(image_tree, tmp_path,
                                                               read_split):
    destination = tmp_path / "converted"
    _convert(image_tree, destination, validation_percentage=34, train_shards=2)

    metadata = json.loads((destination / "dataset_info.json").read_text())
    assert metadata["class_names"] == ["cats", "dogs", "zebras"]
    assert sorted(f["path"] for f in metadata["skipped_files"]) == [
        "dogs/broken.jpg", "zebras/notes.txt"]
    sizes = metadata["splits"]
    assert sizes["train"] + sizes["validation"] == 18
    assert (destination / "labels.txt").read_text() == "0:cats\n1:dogs\n2:zebras\n"
    assert len(list(destination.glob("train-*-of-00002.tfrecord"))) == 2
    labels = {}
    for split in ("train", "validation"):
        spec = dataset_factory.get_dataset("image_folder", split, str(destination))
        assert spec.num_samples == sizes[split]
        assert spec.num_classes == 3 and spec.labels_to_names[2] == "zebras"
        images, labels[split] = read_split("image_folder", split, destination)
        assert len(labels[split]) == sizes[split]
        assert all(image.shape[-1] == 3 for image in images)
    # Stratified: each class has 2 of its 6 or 7 files in validation (34 %, rounded).
    all_labels = np.concatenate(list(labels.values()))
    assert collections.Counter(all_labels.tolist()) == {0: 6, 1: 6, 2: 6}
    assert sizes["validation"] in (4, 5, 6)


def test_split_is_seeded_and_stratified():
    files = [[f"c{c}_{i}" for i in range(n)] for c, n in enumerate((10, 20, 3))]
    train, validation = image_folder.split_stratified(files, 10)
    again = image_folder.split_stratified(files, 10)
    assert (train, validation) == again
    assert collections.Counter(label for _, label in validation) == {0: 1, 1: 2}
    assert len(train) + len(validation) == 33


def test_rerun_is_skipped_and_a_different_split_is_refused(image_tree, tmp_path):
    destination = tmp_path / "converted"
    _convert(image_tree, destination, validation_percentage=20)
    shard = next(destination.glob("train-*.tfrecord"))
    mtime = shard.stat().st_mtime_ns
    _convert(image_tree, destination, validation_percentage=20)
    assert shard.stat().st_mtime_ns == mtime
    with pytest.raises(UsageError, match="already holds a conversion"):
        _convert(image_tree, destination, validation_percentage=30)


@pytest.mark.parametrize("make_source, message", [
    (lambda p: p / "missing", "is not a directory"),
    (lambda p: p, "has no class sub-directories"),
])
def test_bad_source_is_one_clear_error(tmp_path, make_source, message):
    with pytest.raises(UsageError, match=message):
        _convert(make_source(tmp_path), tmp_path / "out")


def test_reading_before_converting_names_the_command(tmp_path):
    with pytest.raises(UsageError, match="--dataset_name=image_folder --source_dir"):
        dataset_factory.get_dataset("image_folder", "train", str(tmp_path))


def test_folder_to_convert_train_eval_through_the_scripts(image_tree, tmp_path):
    data, train, evals = tmp_path / "data", tmp_path / "train", tmp_path / "eval"
    converted = run_script("download_and_convert_data.py", "--dataset_name=image_folder",
                           f"--source_dir={image_tree}", f"--dataset_dir={data}",
                           "--validation_percentage=34")
    assert converted.returncode == 0, converted.stderr[-3000:]
    assert "Skipped 2 file(s)" in converted.stderr and "dogs/broken.jpg" in converted.stderr
    common = ["--dataset_name=image_folder", f"--dataset_dir={data}", "--model_name=lenet"]
    trained = run_script("train_image_classifier.py", *common, f"--train_dir={train}",
                         "--batch_size=4", "--max_number_of_steps=3",
                         "--log_every_n_steps=3", "--optimizer=sgd", "--seed=1")
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "global step 3" in trained.stderr
    evaluated = run_script("eval_image_classifier.py", *common,
                           "--dataset_split_name=validation", f"--checkpoint_path={train}",
                           f"--eval_dir={evals}", "--batch_size=4")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    metrics = json.loads((evals / "metrics.json").read_text())
    sizes = json.loads((data / "dataset_info.json").read_text())["splits"]
    assert metrics["num_examples"] == sizes["validation"]
    assert metrics["num_unreadable"] == 0 and metrics["global_step"] == 3
