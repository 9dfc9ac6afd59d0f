"""image_folder: class sub-directories -> shards + labels.txt + dataset_info.json."""
import collections
import json

import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils
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


def _write_images(directory, count, seed, suffix="jpg"):
    directory.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        image_format = "png" if suffix == "png" else "jpeg"
        (directory / f"{directory.name}_{seed}_{index}.{suffix}").write_bytes(
            testing_utils.encoded_image(20, 24, seed=seed * 10 + index,
                                        image_format=image_format))


@pytest.fixture
def split_tree(tmp_path):
    """SOURCE/{train,val,test}/<class>/: val lacks zebras, test has cats only."""
    source = tmp_path / "split_images"
    for split, counts in (("train", (3, 3, 3)), ("val", (2, 2, 0)), ("test", (1, 0, 0))):
        for seed, (name, count) in enumerate(zip(("cats", "dogs", "zebras"), counts)):
            if count:
                _write_images(source / split / name, count, seed)
    return source


def test_a_source_split_in_train_val_test_keeps_its_splits(split_tree, tmp_path, read_split):
    destination = tmp_path / "converted"
    _convert(split_tree, destination, validation_percentage=34)  # does not apply

    metadata = json.loads((destination / "dataset_info.json").read_text())
    assert metadata["layout"] == "splits"
    assert metadata["splits"] == {"train": 9, "validation": 4, "test": 1}
    assert metadata["split_directories"] == {"train": "train", "validation": "val",
                                             "test": "test"}
    assert (destination / "labels.txt").read_text() == "0:cats\n1:dogs\n2:zebras\n"
    expected = {"train": {0: 3, 1: 3, 2: 3}, "validation": {0: 2, 1: 2}, "test": {0: 1}}
    for split, counts in expected.items():
        assert dataset_factory.get_dataset("image_folder", split,
                                           str(destination)).num_classes == 3
        _, labels = read_split("image_folder", split, destination)
        assert collections.Counter(labels.tolist()) == counts


@pytest.mark.parametrize("extra, message", [
    ("val/tulip", r"val has classes that train/ lacks \(tulip\)"),
    ("validation/cats", "has both val/ and validation/"),
])
def test_a_split_source_that_does_not_add_up_is_one_clear_error(split_tree, tmp_path, extra,
                                                                message):
    _write_images(split_tree / extra, 1, seed=9)
    with pytest.raises(UsageError, match=message):
        _convert(split_tree, tmp_path / "out")


def test_a_rerun_names_what_changed_and_overwrite_converts_again(image_tree, tmp_path):
    destination = tmp_path / "converted"
    _convert(image_tree, destination)
    (destination / "my_notes.txt").write_text("mine\n")  # not the converter's
    _write_images(image_tree / "tulips2", 2, seed=5)
    _write_images(image_tree / "cats", 1, seed=6)
    (image_tree / "dogs" / "dogs_0.jpg").unlink()
    shard = next(destination.glob("train-*.tfrecord"))
    mtime = shard.stat().st_mtime_ns

    with pytest.raises(UsageError) as error:
        _convert(image_tree, destination)
    message = str(error.value)
    assert (f"{image_tree} changed since it was converted into {destination}: 3 files added "
            f"(cats/cats_6_0.jpg, tulips2/tulips2_5_0.jpg, tulips2/tulips2_5_1.jpg), 1 file "
            f"removed (dogs/dogs_0.jpg), 1 class added (tulips2); pass --overwrite") in message
    assert shard.stat().st_mtime_ns == mtime

    _convert(image_tree, destination, overwrite=True)
    assert json.loads((destination / "dataset_info.json").read_text())["class_names"] == [
        "cats", "dogs", "tulips2", "zebras"]
    assert (destination / "my_notes.txt").read_text() == "mine\n"
    _convert(image_tree, destination)  # unchanged now: skipped


def test_an_interrupted_conversion_of_a_source_changed_since_is_refused(image_tree, tmp_path,
                                                                      monkeypatch):
    destination = tmp_path / "converted"

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(dataset_utils, "write_label_file", interrupt)
        with pytest.raises(KeyboardInterrupt):
            _convert(image_tree, destination)
    _write_images(image_tree / "cats", 1, seed=7)
    with pytest.raises(UsageError, match="changed since the interrupted conversion into"):
        _convert(image_tree, destination)


def test_a_labels_file_the_converter_did_not_write_is_kept(image_tree, tmp_path):
    destination = tmp_path / "converted"
    destination.mkdir()
    (destination / "labels.txt").write_text("0:my own names\n")
    _convert(image_tree, destination)
    assert (destination / "labels.txt.replaced").read_text() == "0:my own names\n"
    assert (destination / "labels.txt").read_text() == "0:cats\n1:dogs\n2:zebras\n"


def _records_by_filename(destination):
    records = {}
    for path in sorted(destination.glob("*.tfrecord")):
        for record in tf.data.TFRecordDataset(str(path)):
            feature = tf.train.Example.FromString(record.numpy()).features.feature
            records[feature["image/filename"].bytes_list.value[0].decode()] = feature
    return records


def test_webp_and_exif_rotated_jpeg_are_converted_upright(tmp_path):
    image_module = pytest.importorskip("PIL.Image")
    source = tmp_path / "photos"
    _write_images(source / "cats", 3, seed=1)
    _write_images(source / "dogs", 3, seed=2)
    pixels = testing_utils.gradient_image(12, 20)
    with open(source / "dogs" / "web.webp", "wb") as f:
        image_module.fromarray(pixels).save(f, "WEBP", lossless=True)
    # Stored 16 rows x 24 columns; orientation 6: shown turned 90 degrees clockwise.
    stored = testing_utils.gradient_image(16, 24)
    (source / "cats" / "sideways.jpg").write_bytes(testing_utils.with_exif_orientation(
        tf.io.encode_jpeg(stored, quality=95).numpy(), 6))
    destination = tmp_path / "converted"

    _convert(source, destination, validation_percentage=0)

    metadata = json.loads((destination / "dataset_info.json").read_text())
    assert metadata["skipped_files"] == [] and metadata["exif_oriented_files"] == 1
    records = _records_by_filename(destination)
    webp = records["dogs/web.webp"]
    assert webp["image/format"].bytes_list.value == [b"png"]
    np.testing.assert_array_equal(
        tf.io.decode_png(webp["image/encoded"].bytes_list.value[0]).numpy(), pixels)
    sideways = records["cats/sideways.jpg"]
    assert (sideways["image/height"].int64_list.value[0],
            sideways["image/width"].int64_list.value[0]) == (24, 16)
    upright = tf.io.decode_jpeg(sideways["image/encoded"].bytes_list.value[0]).numpy()
    assert np.abs(upright.astype(int) - np.rot90(stored, k=-1)).max() <= 12


def test_split_folder_converted_then_changed_through_the_script(split_tree, tmp_path):
    data = tmp_path / "data"
    args = ["--dataset_name=image_folder", f"--source_dir={split_tree}",
            f"--dataset_dir={data}"]
    converted = run_script("download_and_convert_data.py", *args)
    assert converted.returncode == 0, converted.stderr[-3000:]
    assert json.loads((data / "dataset_info.json").read_text())["splits"] == {
        "train": 9, "validation": 4, "test": 1}

    _write_images(split_tree / "train" / "tulips", 1, seed=8)
    again = run_script("download_and_convert_data.py", *args)
    assert again.returncode == 1 and "Traceback" not in again.stderr, again.stderr[-3000:]
    errors = [line for line in again.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and errors[0].startswith("ERROR: "), again.stderr[-3000:]
    assert ("1 file added (train/tulips/tulips_8_0.jpg), 1 class added (tulips); pass "
            "--overwrite to convert again") in errors[0]

    replaced = run_script("download_and_convert_data.py", *args, "--overwrite")
    assert replaced.returncode == 0, replaced.stderr[-3000:]
    assert (data / "labels.txt").read_text() == "0:cats\n1:dogs\n2:tulips\n3:zebras\n"
