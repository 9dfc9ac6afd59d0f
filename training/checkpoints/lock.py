"""One writer per train_dir: a lock file naming the training that writes there.

The lock, <train_dir>/training.lock, holds the holder's host, pid, start time and
command, and a heartbeat time its holder rewrites every HEARTBEAT_SECS. Another
training started on that train_dir is refused in one line naming the holder. A lock
whose holder is gone is taken over with one warning: on the same host, when its
process no longer runs; from another host (a shared file system), when its heartbeat
is older than STALE_AFTER_SECS (so the hosts' clocks must agree to within about that).

Taken with a hard link of a complete file (atomic, and never seen half-written); the
holder removes it when it exits (see release_all: scripts exit with os._exit, which
runs no atexit handlers). A SIGKILLed holder leaves it; the next training takes over.
"""
import dataclasses
import datetime
import json
import os
import shlex
import socket
import sys
import threading
import time
from typing import Callable, Optional

from absl import logging

from core.errors import UsageError

LOCK_FILE = 'training.lock'
HEARTBEAT_SECS = 5.0
STALE_AFTER_SECS = 60.0  # without a heartbeat, a holder on another host counts as gone


@dataclasses.dataclass(frozen=True)
class Holder:
    """Who holds a lock: written into the lock file as JSON."""
    host: str
    pid: int
    started: float  # seconds since the epoch
    heartbeat: float
    command: str

    def same_process(self, other: 'Holder') -> bool:
        return (self.host, self.pid, self.started) == (other.host, other.pid, other.started)

    def describe(self, now: float) -> str:
        since = (datetime.datetime.fromtimestamp(self.started).astimezone()
                 .strftime('%Y-%m-%d %H:%M:%S %Z'))
        command = self.command if len(self.command) <= 300 else self.command[:297] + '...'
        return (f'pid {self.pid} on {self.host} since {since} (last heartbeat '
                f'{max(0, now - self.heartbeat):.0f} s ago), running: {command}')


def _process_start_time(pid: int) -> Optional[float]:
    """When a process started, from Linux's /proc; None where that is unknown."""
    try:
        with open(f'/proc/{pid}/stat', encoding='ascii', errors='replace') as f:
            ticks = int(f.read().rsplit(')', 1)[1].split()[19])
        with open('/proc/stat', encoding='ascii') as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith('btime'))
        return boot + ticks / os.sysconf('SC_CLK_TCK')
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _process_runs(pid: int, started: float) -> bool:
    """Whether process pid of this host runs and is the one that took the lock at
    `started` (not a later process given the same pid, e.g. after a restart)."""
    if pid == os.getpid():
        return any(lock.holder.started == started for lock in _held)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    start = _process_start_time(pid)
    return start is None or start <= started + 5  # seconds of slack for clock steps


def gone_reason(holder: Holder, now: float, host: str) -> Optional[str]:
    """Why a lock's holder counts as gone (its process ended, or no heartbeat for
    STALE_AFTER_SECS from another host); None while it holds the lock."""
    if holder.host == host:
        if not _process_runs(holder.pid, holder.started):
            return f'its process {holder.pid} no longer runs'
        return None
    if now - holder.heartbeat > STALE_AFTER_SECS:
        return (f'its last heartbeat was {now - holder.heartbeat:.0f} s ago, more than '
                f'{STALE_AFTER_SECS:.0f} s')
    return None


def _read(path: str) -> Optional[Holder]:
    """The holder a lock file names; None if there is no lock file. A file that cannot
    be parsed counts as a holder on an unknown host, last heard of at its mtime."""
    try:
        with open(path, encoding='utf-8') as f:
            text = f.read()
        mtime = os.stat(path).st_mtime
    except FileNotFoundError:
        return None
    try:
        return Holder(**json.loads(text))
    except (ValueError, TypeError):
        return Holder(host='(unknown host: unreadable lock file)', pid=0, started=mtime,
                      heartbeat=mtime, command='(unknown)')


def _remove_if_there(path: str):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _write_file(path: str, holder: Holder) -> str:
    """Writes holder to a temporary file beside path; returns its name."""
    temporary = f'{path}.{holder.pid}.{threading.get_ident()}.tmp'
    try:
        with open(temporary, 'w', encoding='utf-8') as f:
            json.dump(dataclasses.asdict(holder), f, indent=1)
            f.write('\n')
    except OSError:
        _remove_if_there(temporary)
        raise
    return temporary


_held = []  # the locks this process holds, for release_all


class TrainDirLock:
    """A held lock: its heartbeat runs until release()."""

    def __init__(self, path: str, holder: Holder):
        self.path = path
        self.holder = holder
        self._stop = threading.Event()
        # A heartbeat never rewrites the file after release() removed it. Reentrant:
        # release() may run in a signal handler that interrupted release().
        self._mutex = threading.RLock()
        self._thread = threading.Thread(target=self._beat, name='train_dir_lock',
                                        daemon=True)
        self._thread.start()
        _held.append(self)

    def _beat(self):
        try:
            self._beat_until_released()
        except OSError as error:  # e.g. a full disk: the lock stays, its heartbeat ends
            logging.warning('The heartbeat of the lock %s stopped (%s); from another host '
                            'it counts as abandoned after %.0f s.', self.path, error,
                            STALE_AFTER_SECS)

    def _beat_until_released(self):
        while not self._stop.wait(HEARTBEAT_SECS):
            with self._mutex:
                if self._stop.is_set():
                    return
                current = _read(self.path)
                if current is None or not current.same_process(self.holder):
                    logging.warning('The lock %s is no longer this training\'s (%s); '
                                    'another training may write to its train_dir.',
                                    self.path, 'removed' if current is None else 'taken')
                    return
                beat = dataclasses.replace(self.holder, heartbeat=time.time())
                temporary = _write_file(self.path, beat)
                try:
                    os.replace(temporary, self.path)
                except OSError:  # the older heartbeat stays
                    _remove_if_there(temporary)

    def release(self):
        """Removes the lock file, if it is still this training's."""
        with self._mutex:
            self._stop.set()
            if self in _held:
                _held.remove(self)
            current = _read(self.path)
            if current is not None and current.same_process(self.holder):
                _remove_if_there(self.path)


def release_all():
    """Releases every lock this process holds: call it before os._exit."""
    for lock in list(_held):
        lock.release()


def _create_exclusively(path: str, temporary: str) -> bool:
    """Puts the complete file `temporary` at path unless a file is there; returns
    whether it did. A hard link does both at once; where links are not supported, an
    exclusive create (a reader may then see the file before it is written)."""
    try:
        os.link(temporary, path)
        return True
    except FileExistsError:
        return False
    except OSError:
        pass
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with open(temporary, 'rb') as source, os.fdopen(descriptor, 'wb') as target:
        target.write(source.read())
    return True


def acquire(train_dir: str, *, command: Optional[str] = None,
            clock: Callable[[], float] = time.time,
            host: Optional[str] = None) -> TrainDirLock:
    """Takes train_dir's lock for this process (train_dir must exist), taking over one
    whose holder is gone with one warning; a UsageError names a live holder."""
    path = os.path.join(train_dir, LOCK_FILE)
    host = host or socket.gethostname()
    now = clock()
    mine = Holder(host=host, pid=os.getpid(), started=now, heartbeat=now,
                  command=command or shlex.join([os.path.basename(sys.executable),
                                                 *sys.argv]))
    try:
        taken_over = _take(path, mine, host, clock)
    except OSError as error:
        raise UsageError(f'Cannot write the lock {path} ({error.strerror}); free space '
                         f'there if the disk is full, or pass another --train_dir.') from None
    if taken_over is not None:
        holder, reason = taken_over
        logging.warning('Taking over --train_dir=%s from a training that is gone (%s): %s.',
                        train_dir, reason, holder.describe(clock()))
    return TrainDirLock(path, mine)


def _take(path: str, mine: Holder, host: str, clock) -> Optional[tuple]:
    """Puts mine's lock file at path; returns (holder, why it was gone) when it
    replaced a gone holder's."""
    train_dir = os.path.dirname(path)
    temporary = _write_file(path, mine)
    taken_over = None
    try:
        for _ in range(10):  # each round: a lock was removed or replaced meanwhile
            if _create_exclusively(path, temporary):
                break
            holder = _read(path)
            if holder is None:
                continue
            reason = gone_reason(holder, clock(), host)
            if reason is None:
                raise UsageError(
                    f'--train_dir={train_dir} is in use by another training: '
                    f'{holder.describe(clock())}. Wait for it to finish, stop it, or pass '
                    f'another --train_dir (its lock, {path}, is taken over once that '
                    f'process has ended, or from another host after '
                    f'{STALE_AFTER_SECS:.0f} s without a heartbeat).')
            again = _read(path)
            if again is not None and again.same_process(holder):
                _remove_if_there(path)
                taken_over = (holder, reason)
        else:
            raise UsageError(f'Could not take the lock {path}: other trainings keep '
                             f'taking it; start one training per --train_dir.')
    finally:
        _remove_if_there(temporary)
    return taken_over
