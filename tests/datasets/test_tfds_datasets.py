"""tfds:<name>: a TFDS dataset prepared locally (a builder written here), read offline;
preparing without the network ends in one line at once."""
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow_datasets as tfds

from core.errors import UsageError
from datasets import dataset_factory, input_pipeline
from helpers import offline
from preprocessing import preprocessing_factory


class ToyFruits(tfds.core.GeneratorBasedBuilder):
    """Three classes of 8x8 images; prepared without any download."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(None, None, 3)),
                "label": tfds.features.ClassLabel(names=["apple", "banana", "cherry"]),
            }),
            supervised_keys=("image", "label"))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(9), "test": self._generate_examples(4)}

    def _generate_examples(self, count):
        rng = np.random.default_rng(count)
        for index in range(count):
            yield index, {"image": rng.integers(0, 256, (8, 6 + index % 3, 3), np.uint8),
                          "label": index % 3}


class ToyShapes(ToyFruits):
    """ToyFruits in two configs: prepared into <data_dir>/toy_shapes/<config>/1.0.0."""

    BUILDER_CONFIGS = [tfds.core.BuilderConfig(name="small"),
                       tfds.core.BuilderConfig(name="large")]


class ToyManual(ToyFruits):
    """A dataset whose files are downloaded by hand, as TFDS's imagenet2012."""

    MANUAL_DOWNLOAD_INSTRUCTIONS = "Download the files from the toy site."


class ToyDownload(ToyFruits):
    """A dataset downloaded from a URL that TFDS's checksums do not list."""

    def _split_generators(self, dl_manager):
        dl_manager.download("http://example.invalid/toy_download.zip")
        return super()._split_generators(dl_manager)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tfds")
    ToyFruits(data_dir=str(directory)).download_and_prepare()
    return str(directory)


def test_reads_a_prepared_dataset_by_name(data_dir):
    spec = dataset_factory.get_dataset("tfds:toy_fruits", "train", data_dir)
    assert (spec.num_samples, spec.num_classes) == (9, 3)
    assert spec.labels_to_names == {0: "apple", 1: "banana", 2: "cherry"}
    input_fn = input_pipeline.make_input_fn(
        spec, preprocessing_factory.get_preprocessing("lenet"),
        input_pipeline.InputConfig(batch_size=4, image_size=8, is_training=False))
    labels = np.concatenate([labels.numpy() for _, labels in input_fn(None)])
    assert sorted(labels.tolist()) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    info = dataset_factory.get_info("tfds:toy_fruits", data_dir)
    assert info.splits_to_sizes == {"train": 9, "test": 4}


def test_unknown_split_names_the_tfds_splits(data_dir):
    with pytest.raises(UsageError, match="use one of: .*train"):
        dataset_factory.get_dataset("tfds:toy_fruits", "validation", data_dir)


def test_unprepared_dataset_is_one_line_at_once(tmp_path):
    started = time.time()
    with pytest.raises(UsageError) as error:
        dataset_factory.get_dataset("tfds:oxford_flowers102", "train", str(tmp_path))
    assert time.time() - started < 5
    message = str(error.value)
    assert "not prepared" in message and "--dataset_name=tfds:oxford_flowers102" in message
    assert "\n" not in message


def test_the_config_hint_names_the_prepared_configs(tmp_path):
    for config in ("small", "large"):
        ToyShapes(config=config, data_dir=str(tmp_path)).download_and_prepare()
    with pytest.raises(UsageError) as error:
        dataset_factory.get_dataset("tfds:toy_shapes", "train", str(tmp_path))
    assert "has configs large, small; pick one with --dataset_name=tfds:toy_shapes/<config>" \
        in str(error.value)
    assert "1.0.0" not in str(error.value)
    spec = dataset_factory.get_dataset("tfds:toy_shapes/small", "train", str(tmp_path))
    assert spec.num_samples == 9


def test_a_dataset_downloaded_by_hand_names_its_manual_dir(tmp_path):
    with pytest.raises(UsageError) as error:
        dataset_factory.download_and_convert("tfds:toy_manual", str(tmp_path))
    manual = os.path.join(str(tmp_path), "downloads", "manual")
    assert f"must be downloaded by hand: put its files in {manual}" in str(error.value)
    assert "\n" not in str(error.value)


@pytest.fixture
def closed_port():
    """A port on 127.0.0.1 that refuses connections (bound, never listening)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_preparing_offline_ends_in_one_line_within_seconds(project_root, tmp_path,
                                                           closed_port):
    proxy = f"http://127.0.0.1:{closed_port}"  # every download is refused at once
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(http_proxy=proxy, https_proxy=proxy, HTTP_PROXY=proxy, HTTPS_PROXY=proxy)
    started = time.time()
    result = subprocess.run(
        [sys.executable, "download_and_convert_data.py", "--dataset_name=tfds:mnist",
         f"--dataset_dir={tmp_path}"], cwd=project_root, env=env, capture_output=True,
        text=True, timeout=120)
    assert time.time() - started < 30
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and result.stderr.rstrip().endswith(errors[0]), result.stderr
    manual = os.path.join(str(tmp_path), "downloads", "manual")
    assert errors[0].startswith("ERROR: Cannot reach storage.googleapis.com to download "
                                "TFDS dataset mnist (")
    assert "train-images-idx3-ubyte.gz" in errors[0] and f"in {manual} " in errors[0]
    assert not list(tmp_path.glob("mnist/*/dataset_info.json"))


@pytest.fixture
def refusing_proxy(monkeypatch):
    """Every request of this process answered 403 by a proxy on 127.0.0.1."""
    with offline.refusing_proxy() as (url, _):
        for name in ("no_proxy", "NO_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", url)
        yield


def test_a_refused_download_is_one_line(tmp_path, refusing_proxy):
    started = time.time()
    with pytest.raises(UsageError) as error:
        dataset_factory.download_and_convert("tfds:toy_download", str(tmp_path))
    assert time.time() - started < 30
    message = str(error.value)
    assert message.startswith("Downloading TFDS dataset toy_download failed (") and \
        "HTTP code: 403" in message and "\n" not in message
    assert f"put its files in {tmp_path}/downloads/manual" in message
