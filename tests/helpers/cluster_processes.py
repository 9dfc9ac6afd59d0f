"""Clusters of real processes on 127.0.0.1 for tests: every child's output in a log file,
every wait bounded, every child killed when the test ends, whatever happened."""
import contextlib
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from helpers import testing_utils

ROOT = testing_utils.TEST_DATA.parent.parent
TRAIN = ROOT / 'train_image_classifier.py'
EVAL = ROOT / 'eval_image_classifier.py'


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(('127.0.0.1', 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Processes:
    """Children started with logs in files; all killed on exit."""

    def __init__(self, log_dir):
        self.log_dir = pathlib.Path(log_dir)
        self.children = {}

    def start(self, name, args, env=None):
        env = {**os.environ, 'PYTHONPATH': str(ROOT), **(env or {})}
        env.pop('TF_CPP_MIN_LOG_LEVEL', None)  # the script's own default
        log = open(self.log_dir / f'{name}.log', 'w')
        self.children[name] = subprocess.Popen(
            [sys.executable, *map(str, args)], cwd=ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
        return self.children[name]

    def wait(self, name, timeout):
        try:
            return self.children[name].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f'{name} did not finish within {timeout} s:\n{self.log(name)[-3000:]}')

    def kill(self, name, signum=signal.SIGKILL):
        os.killpg(self.children[name].pid, signum)

    def log(self, name):
        return (self.log_dir / f'{name}.log').read_text()

    def wait_for_log(self, name, pattern, timeout):
        """The first match of pattern in a child's log, polled; fails after timeout or
        if the child exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.log(name))
            if match:
                return match
            if self.children[name].poll() is not None:
                pytest.fail(f'{name} exited before logging {pattern!r}:\n'
                            f'{self.log(name)[-3000:]}')
            time.sleep(0.2)
        pytest.fail(f'{name} did not log {pattern!r} within {timeout} s')

    def kill_all(self):
        for child in self.children.values():
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait(timeout=30)


@contextlib.contextmanager
def processes(log_dir):
    group = Processes(log_dir)
    try:
        yield group
    finally:
        group.kill_all()


def lines_with_error(log: str):
    """Every line that speaks of an error: ours ('ERROR: ...'), absl's or TensorFlow's
    Python ('E1124 ...', 'ERROR:tensorflow:...'), the C++ runtime's and gRPC's
    ('E0000 00:00:...'), and tracebacks."""
    return [line for line in log.splitlines()
            if 'ERROR' in line or 'Traceback' in line or re.match(r'E\d{4} ', line)]


def killed_task_log(group, killed: str, survivor: str, timeout=120) -> str:
    """SIGKILLs task `killed`; the surviving task must then exit 1. Its log."""
    group.kill(killed)
    assert group.wait(survivor, timeout=timeout) == 1, group.log(survivor)[-3000:]
    return group.log(survivor)
