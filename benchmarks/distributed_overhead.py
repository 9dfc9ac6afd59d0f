r"""What each distribution mode costs per example against one process, on one machine:
train_image_classifier.py as a cluster on 127.0.0.1, interleaved.

  .venv/bin/python benchmarks/distributed_overhead.py --dataset_dir=/tmp/shapes \
      --model_name=cifarnet --batch_size=32 --rounds=5

Modes: one process; two one-device processes of one thread each that never
communicate (two_processes_apart: what two workers sharing the cores would train with
free communication; their examples/s summed); multi-worker all-reduce (2 workers),
also with every gradient all-reduced whole (all_reduce_whole_gradients:
--noall_reduce_weight_factors), with the gradients in packs of --bytes_per_pack
(all_reduce_packed), and with each worker's thread pools as large as the machine (all_reduce_every_core: TensorFlow's sizing, which the workers
sharing a host no longer get by default); asynchronous parameter servers
(1 ps + 2 workers); sync replicas (1 ps + 2 workers, N = 2). Every run uses the same net
and per-replica batch and reads the examples/sec of the chief's log lines (examples of
every worker: one update of all-reduce or sync replicas counts 2 x batch), dropping the
first --skip_lines; a run's speed is the median of the rest. A round runs every mode
once, in turn, so the machine's noise hits each alike; printed per mode are its median
examples/s and its ratio to the same round's one process, median [min, max] over rounds.

This measures overhead, not scaling: every task of a cluster shares this machine's
cores with the others, so a mode at 1.0 would be free of cost, and below 1.0 is what
its communication and coordination take.
"""
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app, flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, 'train_image_classifier.py')
RATE = re.compile(r'global step \d+: .*?, ([\d.]+) examples/sec\)')
MODES = ('one_process', 'two_processes_apart', 'all_reduce', 'all_reduce_whole_gradients',
         'all_reduce_packed', 'all_reduce_every_core', 'async_ps', 'sync_replicas')

FLAGS = flags.FLAGS
flags.DEFINE_string('dataset_name', 'shapes', 'Dataset to train on.')
flags.DEFINE_string('dataset_dir', None, 'Its converted records.', required=True)
flags.DEFINE_string('model_name', 'cifarnet', 'Network to train.')
flags.DEFINE_integer('batch_size', 32, 'Batch size per replica, every mode.')
flags.DEFINE_list('modes', list(MODES), f'Modes to measure, of {", ".join(MODES)}.')
flags.DEFINE_integer('rounds', 5, 'Interleaved rounds.')
flags.DEFINE_integer('steps', 300, 'Training steps (updates) per run.')
flags.DEFINE_integer('log_every', 50, 'Steps per log line (each gives one rate).')
flags.DEFINE_integer('skip_lines', 1, 'Log lines dropped at the start of each run.')
flags.DEFINE_integer('timeout', 600, 'Seconds a run may take.')
flags.DEFINE_integer('bytes_per_pack', 1 << 20, 'all_reduce_packed: the workers\' '
                     '--all_reduce_bytes_per_pack.')


def _ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(('127.0.0.1', 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _training_flags(train_dir):
    return [f'--dataset_name={FLAGS.dataset_name}', f'--dataset_dir={FLAGS.dataset_dir}',
            f'--model_name={FLAGS.model_name}', f'--batch_size={FLAGS.batch_size}',
            f'--train_dir={train_dir}', f'--max_number_of_steps={FLAGS.steps}',
            f'--log_every_n_steps={FLAGS.log_every}', '--save_interval_secs=100000',
            '--save_summaries_secs=100000']


def _tasks(mode, train_dir):
    """[(name, flags)] of a mode's processes, the chief last (two_processes_apart: two
    chiefs, 'chief' and 'chief2')."""
    if mode == 'two_processes_apart':
        return [(name, [*_training_flags(f'{train_dir}_{name}'), '--inter_op_threads=1',
                        '--intra_op_threads=1']) for name in ('chief2', 'chief')]
    training = _training_flags(train_dir)
    if mode == 'one_process':
        return [('chief', training)]
    if mode.startswith('all_reduce'):
        ports = _ports(2)
        hosts = f'--worker_hosts=127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}'
        if mode == 'all_reduce_whole_gradients':
            training.append('--noall_reduce_weight_factors')
        if mode == 'all_reduce_packed':
            training.append(f'--all_reduce_bytes_per_pack={FLAGS.bytes_per_pack}')
        if mode == 'all_reduce_every_core':  # TensorFlow's sizing, not the host's share
            cores = os.cpu_count() or 1
            training += [f'--intra_op_threads={cores}', f'--inter_op_threads={cores}']
        return [('worker1', [hosts, '--job_name=worker', '--task=1', *training]),
                ('chief', [hosts, '--job_name=worker', '--task=0', *training])]
    ports = _ports(3)
    cluster = [f'--ps_hosts=127.0.0.1:{ports[0]}',
               f'--worker_hosts=127.0.0.1:{ports[1]},127.0.0.1:{ports[2]}',
               '--wait_for_chief_secs=5']
    sync = ['--sync_replicas', '--replicas_to_aggregate=2'] if mode == 'sync_replicas' else []
    return [('ps0', [*cluster, '--job_name=ps', '--task=0']),
            ('worker1', [*cluster, '--job_name=worker', '--task=1']),
            ('chief', [*cluster, '--job_name=worker', '--task=0', *training, *sync])]


def run_once(mode):
    """The median examples/sec of the chief's log lines after the first --skip_lines
    (two_processes_apart: the sum of both chiefs')."""
    with tempfile.TemporaryDirectory() as work:
        env = {**os.environ, 'PYTHONPATH': ROOT}
        children = {}
        try:
            for name, task_flags in _tasks(mode, os.path.join(work, 'train')):
                children[name] = subprocess.Popen(
                    [sys.executable, SCRIPT, *task_flags], cwd=ROOT, env=env,
                    stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, name), 'w'),
                    start_new_session=True)
            chiefs = [name for name in children if name.startswith('chief')]
            statuses = [children[name].wait(timeout=FLAGS.timeout) for name in chiefs]
            logs = [open(os.path.join(work, name)).read() for name in chiefs]
        finally:
            for child in children.values():
                if child.poll() is None:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
        total = 0.0
        for status, log in zip(statuses, logs):
            if status != 0:
                sys.exit(f'{mode} failed: {(log.strip().splitlines() or ["no output"])[-1]}')
            rates = [float(rate) for rate in RATE.findall(log)][FLAGS.skip_lines:]
            if not rates:
                sys.exit(f'{mode}: no log line after the first {FLAGS.skip_lines}; raise '
                         '--steps.')
            total += statistics.median(rates)
        return total


def main(argv):
    del argv
    unknown = set(FLAGS.modes) - set(MODES)
    if unknown:
        sys.exit(f'Unknown --modes {", ".join(sorted(unknown))}; choose from '
                 f'{", ".join(MODES)}.')
    modes = ['one_process'] + [m for m in FLAGS.modes if m != 'one_process']
    speeds = {mode: [] for mode in modes}
    for round_index in range(FLAGS.rounds):
        started = time.time()
        for mode in modes:
            speeds[mode].append(run_once(mode))
        print(f'round {round_index + 1}: ' + ', '.join(
            f'{mode} {speeds[mode][-1]:.0f}' for mode in modes)
              + f' examples/s ({time.time() - started:.0f} s)', flush=True)
    print(f'\n{FLAGS.model_name}, batch {FLAGS.batch_size} per replica, {FLAGS.rounds} '
          f'rounds; ratio to one process per round: median [min, max]')
    for mode in modes:
        ratios = [s / base for s, base in zip(speeds[mode], speeds['one_process'])]
        print(f'{mode:27s} {statistics.median(speeds[mode]):8.0f} examples/s   '
              f'{statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]')


if __name__ == '__main__':
    app.run(main)
