"""Distributed training with real processes on 127.0.0.1: multi-worker all-reduce and
asynchronous parameter servers, through the training script as users run it.

Every wait is bounded, and every child is killed when a test ends, whatever happened.
"""
import json
import os
import pathlib
import re
import signal
import time

import numpy as np
import pytest

from helpers import testing_utils
from helpers.cluster_processes import ROOT, free_ports, lines_with_error, processes
HERE = pathlib.Path(__file__).resolve().parent.parent / 'helpers'


def last_json(text):
    return json.loads([line for line in text.splitlines() if line.startswith('{')][-1])


# --- Multi-worker all-reduce. ---

def test_multi_worker_matches_one_process_on_the_concatenated_batches(tmp_path):
    ports = free_ports(2)
    workers = [f'127.0.0.1:{p}' for p in ports]
    script = HERE / 'run_multi_worker_training.py'
    with processes(tmp_path) as group:
        for task in range(2):
            tf_config = {'cluster': {'worker': workers},
                         'task': {'type': 'worker', 'index': task}}
            group.start(f'worker{task}', [script, tmp_path / f'worker{task}.npz',
                                          tmp_path / f'train{task}'],
                        env={'TF_CONFIG': json.dumps(tf_config)})
        group.start('reference', [script, tmp_path / 'reference.npz',
                                  tmp_path / 'reference_train', '--reference'])
        for name in ('worker0', 'worker1', 'reference'):
            assert group.wait(name, timeout=240) == 0, group.log(name)[-3000:]
        summaries = {name: last_json(group.log(name))
                     for name in ('worker0', 'worker1', 'reference')}
    assert [s['global_step'] for s in summaries.values()] == [4, 4, 4]
    assert summaries['worker0']['replicas'] == 2
    initial = np.load(tmp_path / 'reference.npz.initial.npz')
    weights = {name: np.load(tmp_path / f'{name}.npz')
               for name in ('worker0', 'worker1', 'reference')}
    for name in weights['reference'].files:
        np.testing.assert_array_equal(weights['worker0'][name], weights['worker1'][name])
        # All-reduce sums two half-batch means where the reference takes one mean of
        # the whole batch (and oneDNN picks kernels by batch size): equal up to float32
        # rounding, which 4 momentum steps grew to 1.8e-5 at most (measured).
        np.testing.assert_allclose(weights['worker0'][name], weights['reference'][name],
                                   rtol=0, atol=1e-4)
        # ...while training moved the weights far more than that.
        assert np.abs(weights['reference'][name] - initial[name]).max() > 1e-2
    # Only the chief writes checkpoints and summaries; each worker its input position.
    chief_files = {p.name for p in (tmp_path / 'train0').iterdir()}
    assert 'model.ckpt-4.index' in chief_files
    assert any(name.startswith('events.out.tfevents') for name in chief_files)
    assert {p.name for p in (tmp_path / 'train1').iterdir()} == {'input_positions'}
    assert (tmp_path / 'train1' / 'input_positions' / 'worker-1-of-2'
            / 'position-4.index').exists()


# --- Asynchronous parameter servers, through the training script. ---

TRAIN = ROOT / 'train_image_classifier.py'
EVAL = ROOT / 'eval_image_classifier.py'


@pytest.fixture(scope='module')
def shapes_data(tmp_path_factory):
    directory = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(directory), num_train=64, num_validation=16)
    return directory


def start_all_reduce_workers(group, shapes_data, train_dir, *flags, worker1_flags=(),
                             chief_command=(TRAIN,)):
    """Two workers, no ps, as the docs start them on two machines (here 127.0.0.1).
    chief_command: the chief's script (and its own arguments) if not the user's."""
    ports = free_ports(2)
    hosts = f'--worker_hosts=127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}'
    for task in range(2):
        group.start(f'worker{task}', [
            *(chief_command if task == 0 else (TRAIN,)), hosts, '--job_name=worker', f'--task={task}', '--dataset_name=shapes',
            f'--dataset_dir={shapes_data}', '--model_name=cifarnet',
            f'--train_dir={train_dir}', *flags, *(worker1_flags if task else ())])
    return ports


@pytest.mark.parametrize('worker1_flags', [
    pytest.param((), id='default_flags'),
    # Its own pace would end its calls elsewhere: every call must still pair. Slow: at
    # default flags the workers' timings differ too, which the fast case covers.
    pytest.param(('--log_every_n_steps=7',), id='worker1_logs_elsewhere',
                 marks=pytest.mark.slow)])
def test_all_reduce_workers_train_through_the_script(tmp_path, shapes_data, worker1_flags):
    """Each worker used to size its compiled calls by its own timing, so their
    all-reduces stopped pairing and both hung at 0 % CPU; now they agree on each call."""
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        start_all_reduce_workers(group, shapes_data, train_dir, '--max_number_of_steps=30',
                                 worker1_flags=worker1_flags)
        for name in ('worker0', 'worker1'):
            assert group.wait(name, timeout=180) == 0, group.log(name)[-3000:]
        chief_log = group.log('worker0')
    assert 'global step 30: loss' in chief_log
    assert 'strategy:     multi_worker' in chief_log
    # Both on 127.0.0.1: each worker's thread pools take its share of the cores.
    assert '2 workers of the cluster share this host' in chief_log
    # cifarnet's fc3 and fc4 weights cross as their gradients' factors, by default.
    assert ('All-reduce: 2 weight(s) as their gradients\' factors (CifarNet/fc3/weights:0, '
            'CifarNet/fc4/weights:0): 1.7 MB per step instead of 7.0 MB.') in chief_log
    assert (train_dir / 'model.ckpt-30.index').exists()


@pytest.mark.slow
def test_a_sigterm_to_one_all_reduce_worker_stops_both_saved(tmp_path, shapes_data):
    """Worker 1's stop request reaches the chief at the next call: both stop at the same
    step, the chief saves it, and every worker exits 0."""
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        start_all_reduce_workers(group, shapes_data, train_dir,
                                 '--max_number_of_steps=100000')
        group.wait_for_log('worker0', r'global step 20: loss', timeout=180)
        group.children['worker1'].send_signal(signal.SIGTERM)
        for name in ('worker0', 'worker1'):
            assert group.wait(name, timeout=60) == 0, group.log(name)[-3000:]
        chief_log = group.log('worker0')
    saved = re.findall(r'Saved checkpoint .*model\.ckpt-(\d+)\.', chief_log)
    assert saved and int(saved[-1]) >= 20, chief_log[-3000:]
    assert (train_dir / f'model.ckpt-{saved[-1]}.index').exists()


@pytest.mark.slow
def test_no_worker_leaves_before_every_worker_has_finished_its_last_call(tmp_path,
                                                                        shapes_data):
    """A worker's part of the last all-reduce can end before its peer has fetched its
    last chunk from it: a worker that exited at once failed the slower one (1 run in 12
    of scripts/run_local_cluster.sh on a loaded host). Here the chief reaches the end 3 s
    after its last call, and worker 1 is still there when it does."""
    arrival_file = tmp_path / 'chief_arrival'
    chief = (HERE / 'run_training_slow_to_leave.py', '--leave_delay_secs=3',
             f'--arrival_file={arrival_file}')
    with processes(tmp_path) as group:
        start_all_reduce_workers(group, shapes_data, tmp_path / 'train',
                                 '--max_number_of_steps=4', chief_command=chief)
        exits = {}
        deadline = time.monotonic() + 180
        while len(exits) < 2 and time.monotonic() < deadline:
            for name in ('worker0', 'worker1'):
                if name not in exits and group.children[name].poll() is not None:
                    exits[name] = time.time()
            time.sleep(0.05)
        for name in ('worker0', 'worker1'):
            assert group.wait(name, timeout=1) == 0, group.log(name)[-3000:]
    assert exits['worker1'] >= float(arrival_file.read_text()), exits
    assert (tmp_path / 'train' / 'model.ckpt-4.index').exists()


@pytest.mark.slow
def test_a_chief_killed_while_the_other_worker_waits_at_the_end_is_named(tmp_path,
                                                                        shapes_data):
    """Worker 1 has finished its last call and waits for the chief, which is killed:
    worker 1 ends in one line naming it, within seconds."""
    arrival_file = tmp_path / 'chief_arrival'
    chief = (HERE / 'run_training_slow_to_leave.py', '--leave_delay_secs=120',
             f'--arrival_file={arrival_file}')
    with processes(tmp_path) as group:
        ports = start_all_reduce_workers(group, shapes_data, tmp_path / 'train',
                                         '--max_number_of_steps=4', chief_command=chief)
        group.wait_for_log('worker1', r'global step 4: loss', timeout=180)
        group.wait_for_log('worker0', r'global step 4: loss', timeout=30)
        time.sleep(1)  # worker 1 reaches the meeting
        group.kill('worker0')
        started = time.monotonic()
        assert group.wait('worker1', timeout=60) == 1
        waited = time.monotonic() - started
        log = group.log('worker1')
    assert lines_with_error(log) == [
        f'ERROR: worker task 0 (127.0.0.1:{ports[0]}) stopped answering at the end of '
        'training; restart every worker with the same flags: training resumes from the '
        'last checkpoint in --train_dir.'], log
    assert waited < 30, waited


def start_ps_cluster(group, num_ps, num_workers, wait_for_chief_secs=3):
    """Starts the ps tasks and workers 1.. (they serve); returns the chief's flags."""
    ports = free_ports(num_ps + num_workers)
    hosts = [f'--ps_hosts={",".join(f"127.0.0.1:{p}" for p in ports[:num_ps])}',
             f'--worker_hosts={",".join(f"127.0.0.1:{p}" for p in ports[num_ps:])}',
             f'--wait_for_chief_secs={wait_for_chief_secs}']
    for task in range(num_ps):
        group.start(f'ps{task}', [TRAIN, *hosts, '--job_name=ps', f'--task={task}'])
    for task in range(1, num_workers):
        group.start(f'worker{task}', [TRAIN, *hosts, '--job_name=worker', f'--task={task}'])
    return [*hosts, '--job_name=worker', '--task=0']


def test_async_parameter_servers_train_through_the_script(tmp_path, shapes_data):
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        chief_flags = start_ps_cluster(group, num_ps=2, num_workers=2)
        group.start('chief', [TRAIN, *chief_flags, '--dataset_name=shapes',
                              f'--dataset_dir={shapes_data}', '--model_name=cifarnet',
                              '--batch_size=4', f'--train_dir={train_dir}',
                              '--max_number_of_steps=12', '--log_every_n_steps=4'])
        assert group.wait('chief', timeout=240) == 0, group.log('chief')[-3000:]
        # The servers notice the chief is gone and exit on their own.
        for name in ('ps0', 'ps1', 'worker1'):
            assert group.wait(name, timeout=180) == 0, group.log(name)[-2000:]
        chief_log = group.log('chief')
        group.start('eval', [EVAL, '--dataset_name=shapes', f'--dataset_dir={shapes_data}',
                             '--dataset_split_name=validation', '--model_name=cifarnet',
                             f'--checkpoint_path={train_dir}',
                             f'--eval_dir={tmp_path / "eval"}'])
        assert group.wait('eval', timeout=120) == 0, group.log('eval')[-2000:]
        eval_log = group.log('eval')
    assert 'global step 12:' in chief_log
    assert (train_dir / 'model.ckpt-12.index').exists()
    plan = chief_log[chief_log.index('Deployment plan:'):]
    assert 'strategy:     parameter_server' in plan
    assert 'input position: not checkpointed (each worker\'s iterator is its own' in plan
    # Variables spread over both ps tasks (round-robin, cifarnet's large layers split).
    placement = re.search(r'variables: +(.*)', plan).group(1)
    assert re.search(r'\d+ on /job:ps/replica:0/task:0/device:CPU:0, \d+ on '
                     r'/job:ps/replica:0/task:1/device:CPU:0$', placement), placement
    assert 'eval/Accuracy:' in eval_log


@pytest.mark.slow
def test_parameter_servers_survive_a_dead_worker_and_a_restarted_chief(tmp_path,
                                                                       shapes_data):
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        chief_flags = start_ps_cluster(group, num_ps=1, num_workers=3,
                                       wait_for_chief_secs=60)
        training = [TRAIN, *chief_flags, '--dataset_name=shapes',
                    f'--dataset_dir={shapes_data}', '--model_name=cifarnet',
                    '--batch_size=4', f'--train_dir={train_dir}', '--log_every_n_steps=10',
                    '--save_interval_secs=1']
        group.start('chief', [*training, '--max_number_of_steps=100000'])
        group.wait_for_log('chief', r'global step [2-9]\d:', timeout=180)
        os.killpg(group.children['worker2'].pid, signal.SIGKILL)
        # Training goes on with the workers left...
        group.wait_for_log('chief', r'global step 1\d\d:', timeout=180)
        # ...and the worker, restarted, rejoins (a new chief needs every worker up).
        group.start('worker2_restarted', [TRAIN, *chief_flags[:3], '--job_name=worker',
                                          '--task=2'])
        group.wait_for_log('worker2_restarted', 'The chief at .* is up', timeout=120)
        step = int(group.wait_for_log('chief',
                                r'Saved checkpoint .*model\.ckpt-(\d*[2-9]\d\d+)',
                                timeout=180).group(1))
        os.killpg(group.children['chief'].pid, signal.SIGKILL)
        group.children['chief'].wait(timeout=30)
        first_run = group.log('chief')
        # The chief may have saved again between the log line and the kill.
        latest = int(re.findall(r'Saved checkpoint .*model\.ckpt-(\d+)', first_run)[-1])
        target = latest + 50
        group.start('chief_restarted', [*training, f'--max_number_of_steps={target}'])
        assert group.wait('chief_restarted', timeout=240) == 0, group.log(
            'chief_restarted')[-3000:]
        restarted = group.log('chief_restarted')
    assert f'global step {target}:' in restarted
    resumed = int(re.search(r'Resumed from .*model\.ckpt-(\d+) at step', restarted).group(1))
    assert resumed >= latest >= step, (resumed, latest, step)
    assert 'Traceback' not in first_run


# --- Sync replicas over parameter servers. ---

SYNC_SCRIPT = HERE / 'run_sync_replicas_training.py'


def start_sync_cluster(group, num_workers, env=None, num_ps=1):
    """The ps tasks and workers 1.. serving (the script); returns the environment of a
    chief that reads its cluster from TF_CONFIG."""
    ps_flag, worker_flag = start_ps_cluster(group, num_ps=num_ps,
                                            num_workers=num_workers)[:2]
    ps, workers = (flag.split('=', 1)[1].split(',') for flag in (ps_flag, worker_flag))
    tf_config = {'cluster': {'ps': ps, 'worker': workers},
                 'task': {'type': 'worker', 'index': 0}}
    return {'TF_CONFIG': json.dumps(tf_config), **(env or {})}


@pytest.mark.slow  # tests/deployment/test_sync_replicas.py checks the averaging in make test
def test_sync_replicas_average_one_gradient_per_worker(tmp_path):
    """N = M = 2: each update is the mean of both workers' gradients of one version,
    which is one step on their batches concatenated."""
    with processes(tmp_path) as group:
        chief_env = start_sync_cluster(group, num_workers=2)
        group.start('chief', [SYNC_SCRIPT, tmp_path / 'sync.npz', tmp_path / 'train',
                              '--aggregate=2', '--steps=4'], env=chief_env)
        group.start('reference', [SYNC_SCRIPT, tmp_path / 'reference.npz',
                                  tmp_path / 'reference_train', '--reference',
                                  '--workers=2', '--steps=4'])
        for name in ('chief', 'reference'):
            assert group.wait(name, timeout=240) == 0, group.log(name)[-3000:]
        sync, reference = (last_json(group.log(name)) for name in ('chief', 'reference'))
    assert sync['global_step'] == reference['global_step'] == 4
    assert sync['dropped'] == 0
    initial = np.load(tmp_path / 'reference.npz.initial.npz')
    trained = np.load(tmp_path / 'sync.npz'), np.load(tmp_path / 'reference.npz')
    for name in initial.files:
        # Two half-batch means against one mean of the whole batch: equal up to float32
        # rounding (measured 1.5e-8), while training moved every weight 100x more.
        np.testing.assert_allclose(trained[0][name], trained[1][name], rtol=0, atol=1e-6)
        assert np.abs(trained[1][name] - initial[name]).max() > 1e-4
    assert (tmp_path / 'train' / 'model.ckpt-4.index').exists()


@pytest.mark.slow
@pytest.mark.parametrize('log_every', [
    pytest.param(40, id='calls_of_many_updates'),
    # A call per update: a chief that waited for the backup's step at each call would
    # take its 1 s per update.
    pytest.param(1, id='a_call_per_update')])
def test_backup_workers_keep_the_pace_of_the_fast_ones(tmp_path, log_every):
    """M = 3, N = 2, one worker's every batch 1 s late: 40 updates take far less than
    the 40 s that waiting for it would, and its stale gradients are dropped and counted."""
    slow_secs, steps = 1.0, 40
    with processes(tmp_path) as group:
        chief_env = start_sync_cluster(group, num_workers=3)
        group.start('chief', [SYNC_SCRIPT, tmp_path / 'sync.npz', tmp_path / 'train',
                              '--aggregate=2', f'--steps={steps}', '--warmup_steps=2',
                              f'--log_every={log_every}', f'--slow_worker_secs={slow_secs}'],
                    env=chief_env)
        assert group.wait('chief', timeout=240) == 0, group.log('chief')[-3000:]
        summary = last_json(group.log('chief'))
        chief_log = group.log('chief')
    assert summary['global_step'] == steps
    # Waiting for the slow worker would take (steps - 2) * slow_secs = 38 s at least.
    # Measured: 8-10 s with a call per update (0.14 s per update), 3-8 s otherwise.
    assert summary['elapsed'] < 0.5 * (steps - 2) * slow_secs, summary
    assert summary['dropped'] >= 1, summary
    # The log counts what was dropped by its last call; a backup's late gradient can
    # still arrive between that and the summary's read.
    logged = [int(n) for n in re.findall(r'Sync replicas: (\d+) stale gradient', chief_log)]
    assert logged and 1 <= logged[-1] <= summary['dropped'], (logged, summary)


def wait_for_file(group, path, watched, timeout):
    """Polls for a file a task writes; fails after timeout or if `watched` exits."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if group.children[watched].poll() is not None:
            pytest.fail(f'{watched} exited before {path} appeared:\n'
                        f'{group.log(watched)[-3000:]}')
        if time.monotonic() > deadline:
            pytest.fail(f'{path} did not appear within {timeout} s:\n'
                        f'{group.log(watched)[-3000:]}')
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.parametrize('stage, chief_flags', [
    # Killed inside its offer, holding the lock, half of its gradient in a slot.
    pytest.param('offer', (), id='inside_its_offer'),
    # Killed after its gradient was taken, before its release: worker 0, slowed,
    # makes worker 1 the one that waits.
    pytest.param('wait', ('--slow_worker=0', '--slow_worker_secs=0.5'), id='waiting')])
def test_sync_replicas_updates_stay_exact_when_a_worker_is_killed(tmp_path, stage,
                                                                  chief_flags):
    """N = M = 2 on 2 ps tasks; worker 1 stops at a test-only fault point (the first
    time its gradient is taken), is killed there and restarted. Every update must
    still be the mean of one gradient of each worker, of one version: the weights
    equal a replay, one process training on both workers' batches concatenated."""
    steps, marker = 6, tmp_path / 'worker1_at_fault_point'
    with processes(tmp_path) as group:
        chief_env = start_sync_cluster(group, num_workers=2, num_ps=2)
        group.start('chief', [SYNC_SCRIPT, tmp_path / 'sync.npz', tmp_path / 'train',
                              '--aggregate=2', f'--steps={steps}', f'--fault={stage}',
                              '--fault_worker=1', f'--fault_marker={marker}',
                              *chief_flags], env=chief_env)
        group.start('reference', [SYNC_SCRIPT, tmp_path / 'reference.npz',
                                  tmp_path / 'reference_train', '--reference',
                                  '--workers=2', f'--steps={steps}'])
        wait_for_file(group, marker, 'chief', timeout=180)
        os.killpg(group.children['worker1'].pid, signal.SIGKILL)
        group.children['worker1'].wait(timeout=30)
        cluster = json.loads(chief_env['TF_CONFIG'])['cluster']
        group.start('worker1_restarted', [
            TRAIN, f'--ps_hosts={",".join(cluster["ps"])}',
            f'--worker_hosts={",".join(cluster["worker"])}', '--wait_for_chief_secs=3',
            '--job_name=worker', '--task=1'])
        for name in ('chief', 'reference'):
            assert group.wait(name, timeout=240) == 0, group.log(name)[-3000:]
        sync, reference = (last_json(group.log(name)) for name in ('chief', 'reference'))
    assert sync['global_step'] == reference['global_step'] == steps
    initial = np.load(tmp_path / 'reference.npz.initial.npz')
    trained = np.load(tmp_path / 'sync.npz'), np.load(tmp_path / 'reference.npz')
    for name in initial.files:
        # As in test_sync_replicas_average_one_gradient_per_worker: float32 rounding
        # only, while a gradient mixed in or missing moves weights by more than 1e-4.
        np.testing.assert_allclose(trained[0][name], trained[1][name], rtol=0, atol=1e-6)
        assert np.abs(trained[1][name] - initial[name]).max() > 1e-4


@pytest.mark.slow
def test_a_dead_parameter_server_stops_the_chief_naming_it_and_the_job_resumes(
        tmp_path, shapes_data):
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        chief_flags = start_ps_cluster(group, num_ps=2, num_workers=2,
                                       wait_for_chief_secs=120)
        training = [TRAIN, *chief_flags, '--dataset_name=shapes',
                    f'--dataset_dir={shapes_data}', '--model_name=lenet',
                    '--batch_size=4', f'--train_dir={train_dir}', '--log_every_n_steps=10',
                    '--save_interval_secs=1']
        group.start('chief', [*training, '--max_number_of_steps=100000'])
        group.wait_for_log('chief', r'Saved checkpoint .*model\.ckpt-\d+', timeout=180)
        ps1_address = chief_flags[0].split('=')[1].split(',')[1]
        os.killpg(group.children['ps1'].pid, signal.SIGKILL)
        assert group.wait('chief', timeout=120) == 1
        failed = group.log('chief')
        assert 'Traceback' not in failed
        # TensorFlow's own gRPC threads may log after it: the line is not always last.
        assert [line for line in failed.splitlines() if line.startswith('ERROR: ')] == [
            f'ERROR: ps task 1 ({ps1_address}) stopped answering, so training stopped; '
            'restart that task, then this one: training resumes from the last '
            'checkpoint in --train_dir.']
        latest = int(re.findall(r'Saved checkpoint .*model\.ckpt-(\d+)', failed)[-1])
        group.start('ps1_restarted', [TRAIN, *chief_flags[:3], '--job_name=ps', '--task=1'])
        group.start('chief_restarted', [*training, f'--max_number_of_steps={latest + 20}'])
        assert group.wait('chief_restarted', timeout=240) == 0, group.log(
            'chief_restarted')[-3000:]
        restarted = group.log('chief_restarted')
    assert re.search(rf'Resumed from .*model\.ckpt-{latest} at step {latest}', restarted)
    assert f'global step {latest + 20}:' in restarted


@pytest.mark.slow
def test_sync_replicas_with_a_backup_train_on_when_a_worker_dies(tmp_path, shapes_data):
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        chief_flags = start_ps_cluster(group, num_ps=1, num_workers=3,
                                       wait_for_chief_secs=60)
        group.start('chief', [TRAIN, *chief_flags, '--dataset_name=shapes',
                              f'--dataset_dir={shapes_data}', '--model_name=lenet',
                              '--batch_size=4', f'--train_dir={train_dir}',
                              '--sync_replicas', '--replicas_to_aggregate=2',
                              '--log_every_n_steps=10', '--max_number_of_steps=150'])
        group.wait_for_log('chief', r'global step [2-9]\d:', timeout=180)
        os.killpg(group.children['worker2'].pid, signal.SIGKILL)
        assert group.wait('chief', timeout=240) == 0, group.log('chief')[-3000:]
        chief_log = group.log('chief')
    plan = chief_log[chief_log.index('Deployment plan:'):]
    assert ('sync replicas: each update averages 2 worker(s)\' gradients of one version, '
            '1 backup(s)') in plan
    assert 'global step 150:' in chief_log
    assert (train_dir / 'model.ckpt-150.index').exists()
    assert 'Traceback' not in chief_log
    # An update trains on N x batch = 2 x 4 examples: the logged rate counts them all.
    rates = re.findall(r'global step \d+: .*\(([\d.]+) sec/step, ([\d.]+) examples/sec\)',
                       chief_log)
    assert len(rates) >= 10, chief_log[-3000:]
    for sec_per_step, examples_per_sec in ((float(a), float(b)) for a, b in rates):
        # Both printed rounded: sec/step to 0.0005, examples/sec to 0.05.
        low = 8 / (sec_per_step + 0.0005) - 0.05
        high = 8 / max(sec_per_step - 0.0005, 1e-9) + 0.05
        assert low <= examples_per_sec <= high, (sec_per_step, examples_per_sec)


@pytest.mark.slow  # tests/training/test_train_loop.py traces one machine in make test
def test_a_trace_covers_every_task_of_the_cluster(tmp_path, shapes_data):
    train_dir = tmp_path / 'train'
    with processes(tmp_path) as group:
        chief_flags = start_ps_cluster(group, num_ps=1, num_workers=2)
        group.start('chief', [TRAIN, *chief_flags, '--dataset_name=shapes',
                              f'--dataset_dir={shapes_data}', '--model_name=lenet',
                              '--batch_size=4', f'--train_dir={train_dir}',
                              '--max_number_of_steps=8', '--log_every_n_steps=4',
                              '--trace_every_n_steps=5'])
        assert group.wait('chief', timeout=240) == 0, group.log('chief')[-3000:]
        chief_log = group.log('chief')
    assert 'Wrote a profiler trace of 3 task(s)' in chief_log
    traces = sorted(p.name for p in (train_dir / 'plugins' / 'profile').glob('*/*.xplane.pb'))
    ports = [address.rsplit(':', 1)[1] for flag in chief_flags[:2]
             for address in flag.split('=', 1)[1].split(',')]
    assert traces == sorted(f'127.0.0.1_{port}.xplane.pb' for port in ports)
