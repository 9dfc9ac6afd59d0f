"""The Device performance flags (docs/performance.md, "GPU") through the training script
on this CPU-only machine: they parse, reach the strategy, the input and TensorFlow's
thread pools, and the run trains."""
import pytest
from helpers import testing_utils
from helpers.cluster_processes import free_ports, processes
from helpers.scripts import ROOT, TRAIN, run_script

GPU_HOST_FLAGS = ['--all_reduce_alg=ring', '--all_reduce_bytes_per_pack=1048576',
                  '--noprefetch_to_device',
                  '--per_replica_buffer_size=2', '--inter_op_threads=2',
                  '--intra_op_threads=2', '--gpu_thread_mode=gpu_private',
                  '--gpu_thread_count=1']


@pytest.fixture(name='shapes_data', scope='module')
def fixture_shapes_data(tmp_path_factory):
    directory = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(directory), num_train=64, num_validation=16)
    return directory


def test_a_multi_worker_run_with_every_flag_trains(tmp_path, shapes_data):
    # One worker of a MultiWorkerMirroredStrategy: the input goes through
    # distribute_datasets_from_function, gradients through its RING collectives.
    train_dir = tmp_path / 'train'
    result = run_script(
        TRAIN, '--dataset_name=shapes', f'--dataset_dir={shapes_data}',
        '--model_name=cifarnet', f'--train_dir={train_dir}', '--strategy=multi_worker',
        '--batch_size=8', '--max_number_of_steps=4', '--log_every_n_steps=2',
        *GPU_HOST_FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stderr
    # Read back from TensorFlow and the environment after they were set.
    assert 'Threads: inter-op 2, intra-op 2; GPU thread mode gpu_private, 1 threads.' in log
    assert 'strategy:     multi_worker (CollectiveAllReduceStrategy)' in log
    assert 'all-reduce:   ring, packs of 1048576 bytes' in log
    assert 'device input: 2 batch(es) per replica prefetched to host memory' in log
    assert 'global step 4: loss' in log
    assert (train_dir / 'model.ckpt-4.index').exists()
    # The run's flags.txt repeats them (a --flagfile resume keeps them).
    recorded = (train_dir / 'flags.txt').read_text().splitlines()
    assert {'--all_reduce_alg=ring', '--noprefetch_to_device',
            '--inter_op_threads=2'} <= set(recorded)


@pytest.mark.slow  # two processes: a RING all-reduce between real workers
def test_two_workers_all_reduce_over_ring(tmp_path, shapes_data):
    ports = free_ports(2)
    hosts = f'--worker_hosts=127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}'
    with processes(tmp_path) as group:
        for task in range(2):
            group.start(f'worker{task}', [
                ROOT / TRAIN, hosts, '--job_name=worker', f'--task={task}',
                '--dataset_name=shapes', f'--dataset_dir={shapes_data}',
                '--model_name=cifarnet', f'--train_dir={tmp_path / "train"}',
                '--max_number_of_steps=6', *GPU_HOST_FLAGS])
        for name in ('worker0', 'worker1'):
            assert group.wait(name, timeout=180) == 0, group.log(name)[-3000:]
        chief_log = group.log('worker0')
    assert 'replicas:     2 worker(s) x 1 clone(s) = 2 in sync' in chief_log
    assert 'all-reduce:   ring' in chief_log
    assert 'global step 6: loss' in chief_log
