"""Input on the tf.data service, with real processes on 127.0.0.1: a dispatcher and data
workers started as users start them (train_image_classifier.py --job_name=data_...),
consumers through the real input_fn, and training through the script.

Faults: a dispatcher killed (-9) and restarted on its port and journal mid-run, a data
worker killed and restarted, and the bounded waits (no data worker, dispatcher gone),
each ending in one line.

Every wait is bounded, and every child is killed when a test ends, whatever happened.
"""
import collections
import json
import re
import signal
import socket
import time

import numpy as np
import pytest

from helpers import testing_utils
from helpers.cluster_processes import ROOT, TRAIN, free_ports, lines_with_error, processes
from helpers.scripts import run_script

CONSUMER = ROOT / 'tests' / 'helpers' / 'run_data_service_consumer.py'
NUM_FILES, PER_FILE = 6, 20  # ids 0..119; 20 per file: no data worker ends mid-batch


def start_service(group, num_workers):
    """A dispatcher and data workers on free ports, each serving; the dispatcher's
    address."""
    ports = free_ports(1 + num_workers)
    address = f'grpc://127.0.0.1:{ports[0]}'
    group.start('dispatcher', [TRAIN, '--job_name=data_dispatcher',
                               f'--data_service_address={address}',
                               f'--data_service_work_dir={group.log_dir / "dispatcher"}'])
    for index, port in enumerate(ports[1:]):
        group.start(f'data_worker{index}', [
            TRAIN, '--job_name=data_worker', f'--data_service_address={address}',
            f'--data_worker_address=127.0.0.1:{port}'])
    for index in range(num_workers):
        group.wait_for_log(f'data_worker{index}', r'Serving as the data worker', 120)
    return address


@pytest.fixture(scope='module')
def ids_data(tmp_path_factory):
    """A `shapes`-layout train split whose labels are example ids 0..119, in 6 files."""
    from datasets import dataset_utils
    directory = tmp_path_factory.mktemp('ids')
    rng = np.random.default_rng(0)
    for shard in range(NUM_FILES):
        ids = np.arange(shard * PER_FILE, (shard + 1) * PER_FILE)
        images = rng.integers(0, 256, (PER_FILE, 32, 32, 3), dtype=np.uint8)
        dataset_utils.write_tfrecord(
            str(directory / f'shapes_train_{shard:05d}-of-{NUM_FILES:05d}.tfrecord'),
            images, ids)
    return directory


def test_two_training_workers_see_every_id_once_over_one_epoch(tmp_path, ids_data):
    """Two data workers, two consumers of one job, one epoch: each id exactly once, in
    all; then SIGTERM stops the servers cleanly."""
    with processes(tmp_path) as group:
        address = start_service(group, num_workers=2)
        outputs = [tmp_path / f'consumer{i}.json' for i in range(2)]
        for index, out in enumerate(outputs):
            group.start(f'consumer{index}', [CONSUMER, ids_data, address, out, index, 2])
        for index in range(2):
            assert group.wait(f'consumer{index}', 180) == 0, group.log(f'consumer{index}')
        for name in ('dispatcher', 'data_worker0', 'data_worker1'):
            group.children[name].send_signal(signal.SIGTERM)
            assert group.wait(name, 30) == 0, group.log(name)[-2000:]
            assert re.search(r'(dispatcher|data worker) at \S+ stopped\.', group.log(name))
    seen = [json.loads(out.read_text())['ids'] for out in outputs]
    counts = collections.Counter(seen[0] + seen[1])
    assert sorted(counts) == list(range(NUM_FILES * PER_FILE))
    assert set(counts.values()) == {1}, {i: n for i, n in counts.items() if n > 1}
    # Both read from the one job (throttled, started together): neither got it all.
    assert seen[0] and seen[1]


@pytest.mark.slow  # also the docs' block (docs/distributed.md), in test-slow
def test_training_reads_through_the_service(tmp_path):
    """One device, cifarnet on shapes: input from a dispatcher and one data worker."""
    data = tmp_path / 'shapes'
    testing_utils.write_small_shapes(str(data), num_train=64, num_validation=16)
    with processes(tmp_path) as group:
        address = start_service(group, num_workers=1)
        group.start('train', [
            TRAIN, f'--data_service_address={address}', '--dataset_name=shapes',
            f'--dataset_dir={data}', '--model_name=cifarnet', f'--train_dir={tmp_path / "t"}',
            '--batch_size=8', '--max_number_of_steps=6', '--seed=1'])
        assert group.wait('train', 180) == 0, group.log('train')[-3000:]
        log = group.log('train')
    assert f'input:        tf.data service at {address}, dynamic sharding' in log
    assert 'global step 6:' in log
    assert (tmp_path / 't' / 'model.ckpt-6.index').exists()


def _one_error_line(result):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr[-2000:]
    assert lines and lines[-1].startswith('ERROR: '), result.stderr[-2000:]
    assert 'Traceback' not in result.stderr and 'grpc' not in lines[-1].lower().replace(
        'grpc://', ''), result.stderr[-2000:]
    return lines[-1]


def test_a_malformed_address_is_one_line(tmp_path):
    line = _one_error_line(run_script(
        'train_image_classifier.py', '--data_service_address=127.0.0.1',
        '--dataset_name=shapes', f'--dataset_dir={tmp_path}', f'--train_dir={tmp_path / "t"}',
        timeout=120))
    assert "--data_service_address='127.0.0.1' is not grpc://host:port" in line


def test_an_unreachable_dispatcher_is_one_line_after_the_wait(tmp_path):
    data = tmp_path / 'shapes'
    testing_utils.write_small_shapes(str(data), num_train=8, num_validation=4)
    port, = free_ports(1)
    start = time.monotonic()
    line = _one_error_line(run_script(
        'train_image_classifier.py', f'--data_service_address=grpc://127.0.0.1:{port}',
        '--wait_for_data_service_secs=2', '--dataset_name=shapes', f'--dataset_dir={data}',
        '--model_name=cifarnet', f'--train_dir={tmp_path / "t"}', '--max_number_of_steps=1',
        timeout=120))
    assert f'No tf.data dispatcher answers at grpc://127.0.0.1:{port} (waited 2 s)' in line
    assert '--job_name=data_dispatcher' in line
    assert time.monotonic() - start < 60


@pytest.mark.parametrize('role', ['data_dispatcher', 'data_worker'])
def test_a_taken_port_is_one_line(role, tmp_path):
    with socket.socket() as holder:
        holder.bind(('', 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        dispatcher = f'grpc://127.0.0.1:{port if role == "data_dispatcher" else 1}'
        line = _one_error_line(run_script(
            'train_image_classifier.py', f'--job_name={role}',
            f'--data_service_address={dispatcher}', f'--data_worker_address=127.0.0.1:{port}',
            f'--data_service_work_dir={tmp_path}', timeout=120))
    assert f'Port {port} of the ' in line and 'is already in use' in line


def test_a_listener_that_is_not_a_dispatcher_is_one_line(tmp_path):
    data = tmp_path / 'shapes'
    testing_utils.write_small_shapes(str(data), num_train=8, num_validation=4)
    with socket.socket() as listener:  # accepts connections, never speaks gRPC
        listener.bind(('127.0.0.1', 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        line = _one_error_line(run_script(
            'train_image_classifier.py', f'--data_service_address=grpc://127.0.0.1:{port}',
            '--wait_for_data_service_secs=2', '--dataset_name=shapes',
            f'--dataset_dir={data}', '--model_name=cifarnet',
            f'--train_dir={tmp_path / "t"}', '--max_number_of_steps=1', timeout=120))
    assert (f'Something listens at grpc://127.0.0.1:{port} but did not answer as a '
            'tf.data dispatcher within 2 s') in line


# --- Faults ---

EPOCHS = 3


def start_dispatcher(group, address, work_dir, name='dispatcher', *flags):
    group.start(name, [TRAIN, '--job_name=data_dispatcher',
                       f'--data_service_address={address}',
                       f'--data_service_work_dir={work_dir}', *flags])
    group.wait_for_log(name, r'Serving the tf\.data dispatcher', 120)


def start_data_worker(group, address, port, name):
    group.start(name, [TRAIN, '--job_name=data_worker', f'--data_service_address={address}',
                       f'--data_worker_address=127.0.0.1:{port}',
                       '--wait_for_data_service_secs=60'])
    group.wait_for_log(name, r'Serving as the data worker', 120)


def reads(group, name):
    """How many ids the consumer has read so far."""
    counts = re.findall(r'^read (\d+)$', group.log(name), re.MULTILINE)
    return int(counts[-1]) if counts else 0


def wait_for_reads(group, name, count, timeout=180):
    deadline = time.monotonic() + timeout
    while reads(group, name) < count:
        assert time.monotonic() < deadline, group.log(name)[-3000:]
        assert group.children[name].poll() is None, group.log(name)[-3000:]
        time.sleep(0.1)


def both_read(group):
    return reads(group, 'consumer0') + reads(group, 'consumer1')


def id_counts(out):
    return collections.Counter(json.loads(out.read_text())['ids'])


@pytest.mark.slow
def test_a_dispatcher_killed_and_restarted_mid_epoch_loses_and_repeats_nothing(
        tmp_path, ids_data):
    """Two consumers of one job, two data workers; kill -9 of the dispatcher in the 2nd of
    3 epochs, restarted 3 s later on the same port and work_dir: the consumers (never
    restarted) read every id once per epoch between them."""
    ports = free_ports(3)
    address = f'grpc://127.0.0.1:{ports[0]}'
    outs = [tmp_path / f'consumer{index}.json' for index in range(2)]
    with processes(tmp_path) as group:
        start_dispatcher(group, address, tmp_path / 'journal')
        for index, port in enumerate(ports[1:]):
            start_data_worker(group, address, port, f'data_worker{index}')
        started = time.monotonic()
        for index, out in enumerate(outs):
            group.start(f'consumer{index}', [CONSUMER, ids_data, address, out, index, 2,
                                             EPOCHS, 0.05])
        deadline = time.monotonic() + 180
        while both_read(group) < 3 * NUM_FILES * PER_FILE // 2:
            assert time.monotonic() < deadline, group.log('consumer0')[-3000:]
            time.sleep(0.1)
        group.kill('dispatcher')
        group.children['dispatcher'].wait(timeout=30)
        at_kill = both_read(group)
        time.sleep(3)
        start_dispatcher(group, address, tmp_path / 'journal', name='dispatcher_again')
        assert 'resuming from its journal' in group.log('dispatcher_again')
        for index in range(2):
            assert group.wait(f'consumer{index}', 240) == 0, group.log(f'consumer{index}')
        elapsed = time.monotonic() - started
        errors = [lines_with_error(group.log(f'consumer{index}')) for index in range(2)]
    counts = id_counts(outs[0]) + id_counts(outs[1])
    assert sorted(counts) == list(range(NUM_FILES * PER_FILE))
    assert set(counts.values()) == {EPOCHS}, {i: n for i, n in counts.items() if n != EPOCHS}
    assert NUM_FILES * PER_FILE < at_kill < 2 * NUM_FILES * PER_FILE
    assert errors == [[], []], errors
    print(f'dispatcher killed after {at_kill} ids; {EPOCHS} epochs read in {elapsed:.1f} s; '
          f'ids per consumer: {[sum(id_counts(out).values()) for out in outs]}')


@pytest.mark.slow
def test_training_goes_on_across_a_dispatcher_kill_and_restart(tmp_path):
    """The script, cifarnet on shapes, one data worker: the dispatcher killed (-9) at step
    >= 20 and restarted 3 s later; the trainer, never restarted, reaches its last step
    with nothing on stderr but its own log."""
    data = tmp_path / 'shapes'
    testing_utils.write_small_shapes(str(data), num_train=64, num_validation=16)
    ports = free_ports(2)
    address = f'grpc://127.0.0.1:{ports[0]}'
    with processes(tmp_path) as group:
        start_dispatcher(group, address, tmp_path / 'journal')
        start_data_worker(group, address, ports[1], 'data_worker')
        started = time.monotonic()
        group.start('train', [
            TRAIN, f'--data_service_address={address}', '--dataset_name=shapes',
            f'--dataset_dir={data}', '--model_name=cifarnet', f'--train_dir={tmp_path / "t"}',
            '--batch_size=8', '--max_number_of_steps=200', '--log_every_n_steps=10',
            '--seed=1'])
        group.wait_for_log('train', r'global step [2-9]\d:', 240)
        group.kill('dispatcher')
        group.children['dispatcher'].wait(timeout=30)
        time.sleep(3)
        start_dispatcher(group, address, tmp_path / 'journal', name='dispatcher_again')
        assert group.wait('train', 300) == 0, group.log('train')[-3000:]
        elapsed = time.monotonic() - started
        log = group.log('train')
    assert 'global step 200:' in log
    assert (tmp_path / 't' / 'model.ckpt-200.index').exists()
    assert not lines_with_error(log), log[-3000:]
    print(f'trained 200 steps across the dispatcher restart in {elapsed:.1f} s')


@pytest.mark.slow
def test_a_data_worker_killed_and_restarted_rejoins(tmp_path, ids_data):
    """kill -9 of one of two data workers in the 1st of 3 epochs, restarted on its
    address: the dispatcher gives it work again, and the consumer, never restarted,
    finishes. Files the killed worker held are lost for that epoch (TensorFlow's dynamic
    sharding visits each at most once); every id is read in the other epochs."""
    ports = free_ports(3)
    address = f'grpc://127.0.0.1:{ports[0]}'
    out = tmp_path / 'consumer.json'
    with processes(tmp_path) as group:
        start_dispatcher(group, address, tmp_path / 'journal')
        for index, port in enumerate(ports[1:]):
            start_data_worker(group, address, port, f'data_worker{index}')
        started = time.monotonic()
        group.start('consumer', [CONSUMER, ids_data, address, out, 0, 1, EPOCHS, 0.05])
        wait_for_reads(group, 'consumer', NUM_FILES * PER_FILE // 2)
        group.kill('data_worker1')
        group.children['data_worker1'].wait(timeout=30)
        start_data_worker(group, address, ports[2], 'data_worker1_again')
        group.wait_for_log('data_worker1_again', r'has [1-9]\d* task\(s\)', 60)
        assert group.wait('consumer', 240) == 0, group.log('consumer')[-3000:]
        elapsed = time.monotonic() - started
        consumer_log = group.log('consumer')
    counts = id_counts(out)
    assert sorted(counts) == list(range(NUM_FILES * PER_FILE))
    assert set(counts.values()) <= {EPOCHS - 1, EPOCHS}, counts
    assert not lines_with_error(consumer_log), consumer_log[-3000:]
    print(f'{EPOCHS} epochs in {elapsed:.1f} s; ids read (times, ids):',
          sorted(collections.Counter(counts.values()).items()))


@pytest.mark.slow  # ~9 s (a wait run out); make test keeps an unreachable dispatcher's
def test_a_data_worker_gone_for_longer_than_the_wait_is_one_line(tmp_path, ids_data):
    """The only data worker killed mid-run, not restarted: TensorFlow would wait for it
    for ever; the consumer ends in one line naming it after --wait_for_data_service_secs."""
    ports = free_ports(2)
    address = f'grpc://127.0.0.1:{ports[0]}'
    with processes(tmp_path) as group:
        start_dispatcher(group, address, tmp_path / 'journal')
        start_data_worker(group, address, ports[1], 'data_worker')
        group.start('consumer', [CONSUMER, ids_data, address, tmp_path / 'c.json', 0, 1, 1000,
                                 0.05, 3])
        wait_for_reads(group, 'consumer', 8)
        group.kill('data_worker')
        start = time.monotonic()
        assert group.wait('consumer', 120) == 1, group.log('consumer')[-3000:]
        elapsed = time.monotonic() - start
        errors = lines_with_error(group.log('consumer'))
    assert errors == [
        f'ERROR: The data worker at 127.0.0.1:{ports[1]} of the tf.data service at {address} '
        'has not answered for 3 s (--wait_for_data_service_secs), and its files hold up the '
        'epoch; restart it with its command (the same --data_worker_address: it rejoins), '
        'then this task.'], errors
    assert elapsed < 60


def test_a_dispatcher_without_a_work_dir_is_one_line():
    line = _one_error_line(run_script(
        'train_image_classifier.py', '--job_name=data_dispatcher',
        '--data_service_address=grpc://127.0.0.1:5050', timeout=120))
    assert '--job_name=data_dispatcher needs --data_service_work_dir=DIR' in line


@pytest.mark.slow  # 6 s (a wait run out); make test keeps the unreachable dispatcher's
def test_no_data_worker_ever_joining_is_one_line_after_the_wait(tmp_path):
    """A dispatcher, no data worker: training (the script) ends in the watchdog's line,
    through the script's guard, and nothing else on stderr."""
    data = tmp_path / 'shapes'
    testing_utils.write_small_shapes(str(data), num_train=8, num_validation=4)
    with processes(tmp_path) as group:
        address = f'grpc://127.0.0.1:{free_ports(1)[0]}'
        start_dispatcher(group, address, tmp_path / 'journal')
        start = time.monotonic()
        result = run_script(
            'train_image_classifier.py', f'--data_service_address={address}',
            '--wait_for_data_service_secs=3', '--dataset_name=shapes', f'--dataset_dir={data}',
            '--model_name=lenet', f'--train_dir={tmp_path / "t"}', '--max_number_of_steps=5',
            timeout=120)
        elapsed = time.monotonic() - start
    line = _one_error_line(result)
    assert line == (f'ERROR: No data worker joined the tf.data service at {address} for 3 s '
                    '(--wait_for_data_service_secs); start one: train_image_classifier.py '
                    f'--job_name=data_worker --data_service_address={address} '
                    '--data_worker_address=HOST:PORT.')
    assert lines_with_error(result.stderr) == [line], result.stderr[-3000:]
    assert not (tmp_path / 't' / 'training.lock').exists()  # released on the way out
    assert elapsed < 60


@pytest.mark.slow  # ~9 s (a wait run out); make test keeps an unreachable dispatcher's
def test_a_dispatcher_gone_for_longer_than_the_wait_is_one_line(tmp_path, ids_data):
    """The dispatcher killed mid-run and not restarted: the consumer and the data worker
    each end in one line after --wait_for_data_service_secs, not TensorFlow's hour."""
    ports = free_ports(2)
    address = f'grpc://127.0.0.1:{ports[0]}'
    with processes(tmp_path) as group:
        start_dispatcher(group, address, tmp_path / 'journal')
        group.start('data_worker', [TRAIN, '--job_name=data_worker',
                                    f'--data_service_address={address}',
                                    f'--data_worker_address=127.0.0.1:{ports[1]}',
                                    '--wait_for_data_service_secs=3'])
        group.wait_for_log('data_worker', r'Serving as the data worker', 120)
        group.start('consumer', [CONSUMER, ids_data, address, tmp_path / 'c.json', 0, 1, 1000,
                                 0.05, 3])
        wait_for_reads(group, 'consumer', 8)
        group.kill('dispatcher')
        start = time.monotonic()
        assert group.wait('consumer', 120) == 1, group.log('consumer')[-3000:]
        assert group.wait('data_worker', 120) == 1, group.log('data_worker')[-3000:]
        elapsed = time.monotonic() - start
        consumer, worker = (lines_with_error(group.log(name))
                            for name in ('consumer', 'data_worker'))
    gone = (f'ERROR: The tf.data dispatcher at {address} has not answered for 3 s '
            '(--wait_for_data_service_secs); restart it on the same port with the same '
            '--data_service_work_dir (its jobs resume), then this task.')
    assert consumer == [gone] and worker == [gone], (consumer, worker)
    assert elapsed < 60
