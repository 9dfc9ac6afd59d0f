"""Shared test set-up: one TensorFlow per pytest process, split into two logical CPUs.

Two logical CPU devices let MirroredStrategy tests run on a machine without GPUs.
They must be configured before TensorFlow initialises its devices, hence at import.
"""
import logging
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)

import pytest  # noqa: E402

from core import seeding  # noqa: E402

PROJECT_ROOT = pathlib.Path(__file__).resolve().parent.parent
TEST_DATA = PROJECT_ROOT / "tests" / "data"


@pytest.fixture(scope='session')
def project_root():
    return PROJECT_ROOT


@pytest.fixture
def test_data_dir():
    return TEST_DATA


@pytest.fixture(scope='session')
def slim_nets():
    """nets.json of slim_reference, reduced to variables and end points."""
    import gzip
    import json
    with gzip.open(TEST_DATA / 'slim_reference' / 'nets.json.gz', 'rt') as f:
        return json.load(f)


@pytest.fixture(autouse=True)
def seeded():
    """Every test starts from the same seeds (Python, numpy, TensorFlow)."""
    seeding.seed_everything(0)


@pytest.fixture(autouse=True)
def absl_level_kept():
    """Each test leaves absl's logger at the level it found: TensorFlow calls such as
    tf.saved_model.save set it to WARNING, which hides the INFO lines later tests read
    with caplog."""
    logger = logging.getLogger('absl')
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture(scope='session')
def shapes_dir(tmp_path_factory):
    """The full shapes dataset (5,000 + 1,000 images), generated once per test run."""
    from datasets import shapes
    directory = tmp_path_factory.mktemp('shapes_full')
    shapes.download_and_convert(str(directory))
    return directory


# Where the suite's time goes: each file's total (setup, call and teardown of its
# tests), printed at the end with the run's total, so every run keeps the record.
_SECONDS_BY_FILE = {}
SLOWEST_FILES_SHOWN = 15


def pytest_runtest_logreport(report):
    path = report.nodeid.split('::', 1)[0]
    _SECONDS_BY_FILE[path] = _SECONDS_BY_FILE.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _SECONDS_BY_FILE:
        return
    total = sum(_SECONDS_BY_FILE.values())
    ranked = sorted(_SECONDS_BY_FILE.items(), key=lambda item: -item[1])
    terminalreporter.write_sep('-', f'time by test file: {total:.0f} s of tests in '
                                    f'{len(ranked)} files, the slowest '
                                    f'{min(SLOWEST_FILES_SHOWN, len(ranked))}')
    for path, seconds in ranked[:SLOWEST_FILES_SHOWN]:
        terminalreporter.write_line(f'{seconds:7.1f} s  {seconds / total:5.1%}  {path}')
