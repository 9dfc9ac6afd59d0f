"""One writer per train_dir: the lock refuses a live holder, takes over from a gone one
(its process ended, or another host's heartbeat stopped), and goes on release."""
import dataclasses
import json
import logging
import os
import subprocess
import sys
import time

import pytest

from core.errors import UsageError
from training.checkpoints import lock as lock_lib
from training.checkpoints.lock import LOCK_FILE, Holder


def _write_lock(train_dir, **fields):
    now = time.time()
    holder = Holder(**{**dict(host='this-host', pid=12345, started=now - 30,
                            heartbeat=now - 2, command='python train_image_classifier.py '
                            '--train_dir=/somewhere'), **fields})
    (train_dir / LOCK_FILE).write_text(json.dumps(dataclasses.asdict(holder)))
    return holder


def _lock_content(train_dir):
    return json.loads((train_dir / LOCK_FILE).read_text())


@pytest.fixture(name='ended_pid')
def fixture_ended_pid():
    """The pid of a process that has ended."""
    process = subprocess.Popen([sys.executable, '-c', 'pass'])
    process.wait(timeout=30)
    return process.pid


@pytest.fixture(name='running_process')
def fixture_running_process():
    process = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])
    time.sleep(0.1)  # it started before the lock it is said to hold
    yield process
    process.kill()
    process.wait(timeout=30)


def test_the_lock_names_its_holder_and_goes_on_release(tmp_path):
    lock = lock_lib.acquire(str(tmp_path), command='python train.py --x=1',
                                  host='this-host')
    content = _lock_content(tmp_path)
    assert content['pid'] == os.getpid() and content['host'] == 'this-host'
    assert content['command'] == 'python train.py --x=1'
    assert abs(content['started'] - time.time()) < 30
    lock.release()
    assert not (tmp_path / LOCK_FILE).exists()
    assert os.listdir(tmp_path) == []  # no temporary file left either
    lock.release()  # twice is harmless


def test_a_live_holder_on_this_host_is_refused_in_one_line(tmp_path, running_process):
    holder = _write_lock(tmp_path, host='this-host', pid=running_process.pid,
                         started=time.time())
    with pytest.raises(UsageError) as error:
        lock_lib.acquire(str(tmp_path), host='this-host')
    message = str(error.value)
    assert '\n' not in message
    assert f'--train_dir={tmp_path} is in use by another training' in message
    assert f'pid {running_process.pid} on this-host since' in message
    assert holder.command in message
    assert 'Wait for it to finish, stop it, or pass another --train_dir' in message
    assert _lock_content(tmp_path)['pid'] == running_process.pid  # untouched


def test_a_lock_whose_process_ended_is_taken_over_with_one_warning(tmp_path, ended_pid,
                                                                    caplog):
    _write_lock(tmp_path, host='this-host', pid=ended_pid)
    with caplog.at_level(logging.WARNING):
        lock = lock_lib.acquire(str(tmp_path), host='this-host')
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert f'its process {ended_pid} no longer runs' in warnings[0]
    assert f'pid {ended_pid} on this-host' in warnings[0]
    assert _lock_content(tmp_path)['pid'] == os.getpid()
    lock.release()


def test_a_pid_now_of_a_later_process_counts_as_ended(tmp_path, running_process):
    # The pid runs, but that process started after the lock was taken: a reused pid.
    _write_lock(tmp_path, host='this-host', pid=running_process.pid,
                started=time.time() - 3600)
    lock_lib.acquire(str(tmp_path), host='this-host').release()


def test_another_hosts_lock_is_taken_over_only_without_a_recent_heartbeat(tmp_path,
                                                                           caplog):
    bound = lock_lib.STALE_AFTER_SECS
    _write_lock(tmp_path, host='other-host', pid=os.getpid(),
                heartbeat=time.time() - bound / 2)
    with pytest.raises(UsageError, match='pid .* on other-host since .* after 60 s'):
        lock_lib.acquire(str(tmp_path), host='this-host')
    _write_lock(tmp_path, host='other-host', heartbeat=time.time() - bound - 30)
    with caplog.at_level(logging.WARNING):
        lock = lock_lib.acquire(str(tmp_path), host='this-host')
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and 'more than 60 s' in warnings[0]
    assert 'on other-host' in warnings[0]
    lock.release()


def test_an_unreadable_lock_file_counts_by_its_age(tmp_path):
    path = tmp_path / LOCK_FILE
    path.write_text('{"host": "cut off')
    with pytest.raises(UsageError, match='in use by another training'):
        lock_lib.acquire(str(tmp_path), host='this-host')
    old = time.time() - lock_lib.STALE_AFTER_SECS - 10
    os.utime(path, (old, old))
    lock_lib.acquire(str(tmp_path), host='this-host').release()


def test_a_lock_left_by_an_earlier_process_with_this_pid_is_taken_over(tmp_path):
    _write_lock(tmp_path, host='this-host', pid=os.getpid(), started=time.time() - 100)
    lock = lock_lib.acquire(str(tmp_path), host='this-host')
    # This very process holds it now: a second Trainer here is refused.
    with pytest.raises(UsageError, match=f'pid {os.getpid()} on this-host'):
        lock_lib.acquire(str(tmp_path), host='this-host')
    lock.release()


def test_the_heartbeat_refreshes_the_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(lock_lib, 'HEARTBEAT_SECS', 0.05)
    lock = lock_lib.acquire(str(tmp_path))
    first = _lock_content(tmp_path)['heartbeat']
    deadline = time.time() + 10
    while _lock_content(tmp_path)['heartbeat'] == first and time.time() < deadline:
        time.sleep(0.05)
    assert _lock_content(tmp_path)['heartbeat'] > first
    assert _lock_content(tmp_path)['started'] == first  # the holder stays the same
    lock.release()
    assert not (tmp_path / LOCK_FILE).exists()


def test_release_leaves_a_lock_another_training_took_over(tmp_path):
    lock = lock_lib.acquire(str(tmp_path))
    _write_lock(tmp_path, host='other-host')
    lock.release()
    assert _lock_content(tmp_path)['host'] == 'other-host'


def test_release_all_releases_what_this_process_holds(tmp_path):
    (tmp_path / 'a').mkdir()
    (tmp_path / 'b').mkdir()
    lock_lib.acquire(str(tmp_path / 'a'))
    lock_lib.acquire(str(tmp_path / 'b'))
    lock_lib.release_all()
    assert not (tmp_path / 'a' / LOCK_FILE).exists()
    assert not (tmp_path / 'b' / LOCK_FILE).exists()


_CONTENDER = '''
import sys, time
from core.errors import UsageError
from training.checkpoints import lock as lock_lib
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))
try:
    lock_lib.acquire(sys.argv[1])
except UsageError:
    print('refused')
else:
    print('took it')
    time.sleep(3)  # hold it while the others try
'''


@pytest.mark.slow  # 5 s of contenders; make test refuses a second training in tests/e2e
def test_of_trainings_starting_at_once_exactly_one_takes_the_lock(tmp_path):
    start = time.time() + 2  # after all have imported the module
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))
    contenders = [subprocess.Popen([sys.executable, '-c', _CONTENDER, str(tmp_path),
                                    str(start)], stdout=subprocess.PIPE, text=True, env=env)
                  for _ in range(4)]
    outcomes = sorted(c.communicate(timeout=60)[0].strip() for c in contenders)
    assert outcomes == ['refused', 'refused', 'refused', 'took it']
