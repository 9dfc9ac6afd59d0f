"""The script, run as a user would: bad input gives one ERROR line and a non-zero exit."""
import concurrent.futures
import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from datasets import dataset_factory, flowers
from helpers import offline


def _run(project_root, *args, env=None):
    return subprocess.run([sys.executable, "download_and_convert_data.py", *args],
                          cwd=project_root, capture_output=True, text=True, timeout=300,
                          env=env)


BAD_INPUT = {
    "no_flags": ([], "--dataset_name with one of: cifar10, flowers, image_folder"),
    "unknown_name": (["--dataset_name=imagenet2", "--dataset_dir=/tmp/x"],
                     "Unknown dataset name 'imagenet2'; use --dataset_name with one of: "
                     "cifar10, flowers, image_folder, imagenet, mnist, shapes, "
                     "visualwakewords, or tfds:<name>[/<config>]"),
    "image_folder_without_source": (["--dataset_name=image_folder", "--dataset_dir=/tmp/x"],
                                    "pass --source_dir=DIR"),
    "no_dir": (["--dataset_name=mnist"], "pass --dataset_dir=DIR"),
    "empty_dir": (["--dataset_name=mnist", "--dataset_dir="], "pass --dataset_dir=DIR"),
    "stray_argument": (["--dataset_name=mnist", "--dataset_dir=/tmp/x", "stray"],
                       "Unexpected arguments stray"),
    "dataset_dir_is_a_file": (["--dataset_name=shapes", "--dataset_dir=README.md"],
                              "README.md is a file, not a directory; pass a directory"),
}


@pytest.fixture(scope="module")
def bad_input_results(project_root):
    """Each case's run, started together (each process spends seconds importing)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(_run, project_root, *args)
                   for name, (args, _) in BAD_INPUT.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("name", sorted(BAD_INPUT))
def test_bad_input_exits_with_one_line(name, bad_input_results):
    result = bad_input_results[name]
    expected = BAD_INPUT[name][1]

    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    error_lines = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert len(error_lines) == 1, result.stderr
    assert error_lines[0].startswith("ERROR: ")
    assert expected in error_lines[0]
    assert result.stderr.rstrip().endswith(error_lines[0])


# Slow: the fast docs test runs the same command (docs/data.md); this compares every
# example with the library's, and took 7 s alone but up to 47 s inside the suite.
@pytest.mark.slow
def test_generates_shapes_identical_to_the_library(project_root, tmp_path, shapes_dir,
                                                   read_split):
    result = _run(project_root, "--dataset_name=shapes", f"--dataset_dir={tmp_path}")

    assert result.returncode == 0, result.stderr
    spec = dataset_factory.get_dataset("shapes", "train", str(tmp_path))
    assert len(spec.list_files()) == 2
    assert "Finished generating shapes" in result.stderr
    # Generated from a fixed seed: the script writes the same examples as the library
    # did (not always the same bytes: protobuf map order varies between processes).
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in shapes_dir.iterdir())
    for split in ("train", "validation"):
        for ours, theirs in zip(read_split("shapes", split, tmp_path),
                                read_split("shapes", split, shapes_dir)):
            np.testing.assert_array_equal(ours, theirs)


@pytest.fixture
def offline_proxy():
    """The environment of a script run that must not reach the internet, and the
    requests it tried."""
    with offline.refusing_proxy() as (url, requests):
        env = {k: v for k, v in os.environ.items()
               if k.lower() not in ("no_proxy", "http_proxy")}
        env["http_proxy"] = url
        yield env, requests


def test_a_foreign_archive_survives_a_failed_conversion(project_root, tmp_path,
                                                        offline_proxy):
    env, requests = offline_proxy
    dataset_dir = tmp_path / "flowers"
    dataset_dir.mkdir()
    theirs = b"not the flowers archive"
    (dataset_dir / "flower_photos.tgz").write_bytes(theirs)

    result = _run(project_root, "--dataset_name=flowers", f"--dataset_dir={dataset_dir}",
                  env=env)

    assert requests == [flowers.DATA_URL]  # the proxy answered; nothing left the machine
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    error_lines = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert len(error_lines) == 1, result.stderr
    assert (f"{dataset_dir / 'flower_photos.tgz'} has sha256 "
            f"{hashlib.sha256(theirs).hexdigest()}, not the expected {flowers.SHA256}, and "
            f"was left as it is" in error_lines[0])
    assert sorted(p.name for p in dataset_dir.iterdir()) == ["flower_photos.tgz"]
    assert (dataset_dir / "flower_photos.tgz").read_bytes() == theirs
