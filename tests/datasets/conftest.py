"""Fixtures that build small archives in the original MNIST/CIFAR-10 formats and serve them."""
import dataclasses
import functools
import gzip
import hashlib
import http.server
import io
import pathlib
import tarfile
import threading

import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils

from datasets import dataset_factory


def sha256_hex(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@dataclasses.dataclass
class Server:
    directory: pathlib.Path  # Files put here are served.
    base_url: str  # Ends with "/".
    requests: list  # Paths requested so far.


@pytest.fixture
def http_server(tmp_path):
    """An HTTP server on 127.0.0.1 serving a fresh directory, in a background thread."""
    directory = tmp_path / "served"
    directory.mkdir()
    requests = []

    class RecordingHandler(_QuietHandler):
        def do_GET(self):
            requests.append(self.path)
            super().do_GET()

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(RecordingHandler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Server(directory, f"http://127.0.0.1:{server.server_address[1]}/", requests)
    server.shutdown()
    server.server_close()
    thread.join()


def _gzip_write(path: pathlib.Path, data: bytes) -> None:
    with gzip.open(path, "wb") as f:
        f.write(data)


@dataclasses.dataclass
class MnistFiles:
    sha256s: dict  # File name -> sha256.
    images: dict  # Split -> uint8 [N, 28, 28, 1].
    labels: dict  # Split -> int [N].


@pytest.fixture
def mnist_files(http_server):
    """The four MNIST idx.gz files with a few random images each, served by http_server."""
    rng = np.random.default_rng(7)
    names = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
             "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
    files = MnistFiles({}, {}, {})
    for split, count in (("train", 20), ("test", 7)):
        images = rng.integers(0, 256, (count, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, count, dtype=np.uint8)
        images_name, labels_name = names[split]
        _gzip_write(http_server.directory / images_name,
                    np.array([2051, count, 28, 28], ">u4").tobytes() + images.tobytes())
        _gzip_write(http_server.directory / labels_name,
                    np.array([2049, count], ">u4").tobytes() + labels.tobytes())
        files.images[split] = images[..., None]
        files.labels[split] = labels.astype(np.int64)
    files.sha256s = {p.name: sha256_hex(p) for p in http_server.directory.iterdir()}
    return files


@dataclasses.dataclass
class CifarArchive:
    path: pathlib.Path
    url: str  # file:// URL of path.
    sha256: str
    images: dict  # Split -> uint8 [N, 32, 32, 3].
    labels: dict  # Split -> int [N].


@pytest.fixture
def cifar_archive(tmp_path):
    """A cifar-10-binary.tar.gz with the original member names and a few records per batch."""
    rng = np.random.default_rng(11)
    source = tmp_path / "source"
    source.mkdir()
    path = source / "cifar-10-binary.tar.gz"
    images, labels = {"train": [], "test": []}, {"train": [], "test": []}
    with tarfile.open(path, "w:gz") as tar:
        def add(name, data):
            info = tarfile.TarInfo(f"cifar-10-batches-bin/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        directory = tarfile.TarInfo("cifar-10-batches-bin")
        directory.type = tarfile.DIRTYPE
        tar.addfile(directory)
        add("batches.meta.txt", b"airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\n"
                                b"horse\nship\ntruck\n")
        batches = [("train", f"data_batch_{i}.bin", 3) for i in range(1, 6)]
        for split, name, count in batches + [("test", "test_batch.bin", 4)]:
            chw = rng.integers(0, 256, (count, 3, 32, 32), dtype=np.uint8)
            batch_labels = rng.integers(0, 10, count, dtype=np.uint8)
            records = np.concatenate([batch_labels[:, None], chw.reshape(count, -1)], axis=1)
            add(name, records.tobytes())
            images[split].append(chw.transpose(0, 2, 3, 1))
            labels[split].append(batch_labels.astype(np.int64))
    return CifarArchive(path, path.as_uri(), sha256_hex(path),
                        {k: np.concatenate(v) for k, v in images.items()},
                        {k: np.concatenate(v) for k, v in labels.items()})


@pytest.fixture
def read_split():
    """Returns a function reading one split back through the factory: (images, labels)."""
    def read(name, split_name, dataset_dir):
        spec = dataset_factory.get_dataset(name, split_name, str(dataset_dir))
        records = tf.data.TFRecordDataset(spec.list_files()).map(spec.decode)
        images, labels = zip(*records.as_numpy_iterator())
        if len({image.shape for image in images}) > 1:  # images of varying size
            return list(images), np.array(labels)
        return np.stack(images), np.array(labels)

    return read


@pytest.fixture
def image_tree(tmp_path):
    """SOURCE/<class>/ with 6 readable images per class (JPEG and PNG), plus one corrupt
    JPEG and one text file, which conversion must list and skip."""
    source = tmp_path / "my_images"
    for label, name in enumerate(("cats", "dogs", "zebras")):
        directory = source / name
        directory.mkdir(parents=True)
        for index in range(6):
            image_format = "png" if index == 5 else "jpeg"
            suffix = "png" if image_format == "png" else "jpg"
            (directory / f"{name}_{index}.{suffix}").write_bytes(
                testing_utils.encoded_image(20 + index, 24 + label, seed=10 * label + index,
                              image_format=image_format))
    (source / "dogs" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    (source / "zebras" / "notes.txt").write_text("not an image\n")
    return source
