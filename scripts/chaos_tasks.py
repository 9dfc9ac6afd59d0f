"""The processes of scripts/chaos_cluster.py: a task's runs, each with its log file,
killed by process group; the memory sampler; free ports on 127.0.0.1."""
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading

ROOT = pathlib.Path(__file__).resolve().parent.parent


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(('127.0.0.1', 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Task:
    """One task of the cluster; each (re)start is a run with its own log file."""

    def __init__(self, name: str, argv, log_dir: pathlib.Path):
        self.name, self.argv, self.log_dir = name, [str(a) for a in argv], log_dir
        self.runs = []  # dicts: log path, process, killed, expected error patterns

    def start(self):
        suffix = f'.restart{len(self.runs)}' if self.runs else ''
        path = self.log_dir / f'{self.name}{suffix}.log'
        env = {**os.environ, 'PYTHONPATH': str(ROOT)}
        env.pop('TF_CPP_MIN_LOG_LEVEL', None)  # the script's own default
        with open(path, 'w') as log:
            process = subprocess.Popen([sys.executable, *self.argv], cwd=ROOT, env=env,
                                       stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self.runs.append({'log': path, 'process': process, 'killed': False,
                          'expected': []})

    @property
    def process(self):
        return self.runs[-1]['process']

    def alive(self) -> bool:
        return bool(self.runs) and self.process.poll() is None

    def signal(self, signum=signal.SIGKILL):
        if self.alive():
            os.killpg(self.process.pid, signum)
            self.runs[-1]['killed'] = signum == signal.SIGKILL
            if signum == signal.SIGKILL:
                self.process.wait(timeout=30)

    def log(self) -> str:
        return self.runs[-1]['log'].read_text(errors='replace')


class MemorySampler(threading.Thread):
    """The peaks over time of the tasks' live processes' summed RSS and PSS, sampled
    each second. RSS counts the pages the tasks share (TensorFlow's libraries) once per
    task; PSS splits them between the tasks, so its sum is the machine's real cost."""

    def __init__(self, tasks):
        super().__init__(daemon=True)
        self.tasks, self.stopped = tasks, threading.Event()
        self.peak = {'Rss': 0, 'Pss': 0}

    def run(self):
        while not self.stopped.wait(1.0):
            total = {'Rss': 0, 'Pss': 0}
            for task in self.tasks:
                for run in task.runs:
                    if run['process'].poll() is None:
                        for key, value in _memory_bytes(run['process'].pid).items():
                            total[key] += value
            self.peak = {key: max(self.peak[key], total[key]) for key in total}


def _memory_bytes(pid: int) -> dict:
    """{'Rss': bytes, 'Pss': bytes} of a process, from /proc/PID/smaps_rollup."""
    found = {}
    try:
        with open(f'/proc/{pid}/smaps_rollup') as rollup:
            for line in rollup:
                key = line.split(':')[0]
                if key in ('Rss', 'Pss'):
                    found[key] = int(line.split()[1]) * 1024
    except OSError:  # it exited between the poll and the read
        pass
    return found
