"""Unreadable data is skipped and counted; damaged shards do not end the run."""
import json

import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils
from helpers.scripts import run_script

from datasets import dataset_factory, dataset_utils, input_pipeline
from preprocessing import preprocessing_factory

NUM_GOOD = 12


def _good_records(seed=0):
    rng = np.random.default_rng(seed)
    for index in range(NUM_GOOD):
        image = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
        png = tf.io.encode_png(image).numpy()
        yield dataset_utils.image_to_tfexample(png, b"png", 32, 32, index % 10)


def _write(path, records):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record if isinstance(record, bytes) else record.SerializeToString())


@pytest.fixture
def damaged_dir(tmp_path):
    """shapes-named shards: 12 good examples, one record that is no Example, one whose
    image does not decode, one shard cut short and one with a corrupted byte."""
    good = list(_good_records())
    undecodable = dataset_utils.image_to_tfexample(b"\x89PNG\r\n\x1a\nbroken", b"png",
                                                   32, 32, 3)
    _write(tmp_path / "shapes_validation_00000-of-00004.tfrecord",
           good[:4] + [b"not a tf.train.Example"] + good[4:6] + [undecodable])
    _write(tmp_path / "shapes_validation_00001-of-00004.tfrecord", good[6:8])
    for name, records in (("00002", good[8:10]), ("00003", good[10:12])):
        _write(tmp_path / "tail.tfrecord", records + [good[0]])
        data = (tmp_path / "tail.tfrecord").read_bytes()
        if name == "00002":  # truncated inside the third record
            data = data[:-20]
        else:  # the third record's payload damaged: its CRC no longer matches
            data = bytearray(data)
            data[-30] ^= 0xFF
        (tmp_path / f"shapes_validation_{name}-of-00004.tfrecord").write_bytes(bytes(data))
    (tmp_path / "tail.tfrecord").unlink()
    return tmp_path


def _input_fn(dataset_dir, is_training, batch_size=5):
    spec = dataset_factory.get_dataset("shapes", "validation", str(dataset_dir))
    preprocess = preprocessing_factory.get_preprocessing("cifarnet", is_training)
    return input_pipeline.make_input_fn(spec, preprocess, input_pipeline.InputConfig(
        batch_size=batch_size, image_size=32, is_training=is_training, seed=3,
        deterministic=True, report_skipped=True))


def test_evaluation_reads_every_readable_example_once_and_counts_the_rest(damaged_dir):
    batches = list(_input_fn(damaged_dir, is_training=False)(None))
    labels = np.concatenate([labels.numpy() for _, labels, _ in batches])
    assert sorted(labels.tolist()) == sorted(i % 10 for i in range(NUM_GOOD))
    assert int(batches[-1][2]) == 2  # the non-Example record and the broken PNG


def test_training_skips_and_counts_without_stopping(damaged_dir):
    dataset = _input_fn(damaged_dir, is_training=True, batch_size=6)(None)
    counts = []
    for images, labels, skipped in dataset.take(12):  # 72 examples: about 6 epochs
        assert images.shape == (6, 32, 32, 3)
        assert labels.numpy().min() >= 0
        counts.append(int(skipped))
    assert counts == sorted(counts)  # a running count
    assert counts[-1] >= 8  # 2 per epoch


def test_without_report_batches_stay_pairs(damaged_dir):
    spec = dataset_factory.get_dataset("shapes", "validation", str(damaged_dir))
    input_fn = input_pipeline.make_input_fn(
        spec, preprocessing_factory.get_preprocessing("cifarnet"),
        input_pipeline.InputConfig(batch_size=100, image_size=32, is_training=False))
    (images, labels), = list(input_fn(None))
    assert len(labels) == NUM_GOOD


def test_scripts_report_skipped_examples(tmp_path):
    data = tmp_path / "data"
    testing_utils.write_small_shapes(str(data), num_train=16, num_validation=8)
    bad = [b"garbage record", dataset_utils.image_to_tfexample(b"\xff\xd8\xffnope", b"jpeg",
                                                               32, 32, 1)]
    for split in ("train", "validation"):
        _write(data / f"shapes_{split}_damaged.tfrecord", bad)
    common = ["--dataset_name=shapes", f"--dataset_dir={data}", "--model_name=cifarnet",
              "--batch_size=8"]
    trained = run_script("train_image_classifier.py", *common, f"--train_dir={tmp_path}/t",
                         "--max_number_of_steps=4", "--log_every_n_steps=2",
                         "--save_summaries_secs=0", "--seed=1")
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "unreadable example(s) so far" in trained.stderr
    tags = {value.tag for path in (tmp_path / "t").glob("events.out.tfevents.*")
            for event in tf.compat.v1.train.summary_iterator(str(path))
            for value in event.summary.value}
    assert "input/skipped_examples" in tags
    evaluated = run_script("eval_image_classifier.py", *common,
                           "--dataset_split_name=validation",
                           f"--checkpoint_path={tmp_path}/t", f"--eval_dir={tmp_path}/e")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "eval/unreadable_examples: 2" in evaluated.stdout
    metrics = json.loads((tmp_path / "e" / "metrics.json").read_text())
    assert (metrics["num_examples"], metrics["num_unreadable"]) == (8, 2)
