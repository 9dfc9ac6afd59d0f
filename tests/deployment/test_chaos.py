"""Chaos at scale on 127.0.0.1 (issue 36, item 6): scripts/chaos_cluster.py, as a user
runs it, for each cluster mode under its seeded fault schedule. Each run is minutes on
2 cores (docs/distributed.md, "Chaos at scale", has the figures).

What must hold for every seed: training reaches --max_number_of_steps; every fault of
the schedule was injected and left exactly its one line on the surviving tasks (the
tool checks every log: ours only, never TensorFlow's or gRPC's, no traceback); sync
replicas: every applied update combined exactly N gradients (the final checkpoint's
counters); async: the chief's checkpoints advance and the last one evaluates;
all-reduce: the survivors stop, each in one line, and the restarted cluster ends
bit-identical to an uninterrupted one.
"""
import json
import re
import subprocess
import sys

import pytest

from helpers import testing_utils
from helpers.cluster_processes import ROOT, lines_with_error

CHAOS = ROOT / 'scripts' / 'chaos_cluster.py'
SEED = 1


@pytest.fixture(scope='module')
def shapes_data(tmp_path_factory):
    directory = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(directory), num_train=64, num_validation=16)
    return directory


def run_chaos(tmp_path, shapes_data, *flags, timeout=900):
    """The tool's summary (summary.json), after it exited 0 within `timeout`."""
    log_dir = tmp_path / 'chaos'
    done = subprocess.run(
        [sys.executable, CHAOS, f'--dataset_dir={shapes_data}', f'--log_dir={log_dir}',
         f'--seed={SEED}', f'--timeout_secs={timeout - 120}', *flags],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((log_dir / 'summary.json').read_text())
    print(done.stdout)  # the figures, with -s
    assert summary['problems'] == [] and summary['not_injected'] == [], summary
    return summary, log_dir


def injected(summary, kind):
    return [f for f in summary['faults'] if f['kind'] == kind and 'at_step' in f]


@pytest.mark.slow  # 12 processes on 2 cores: ~2 min
def test_sync_replicas_2_ps_10_workers_every_update_combines_n_gradients(tmp_path,
                                                                         shapes_data):
    steps = 100
    summary, log_dir = run_chaos(tmp_path, shapes_data, '--mode=sync_replicas',
                                 '--fault_in_critical_section',
                                 f'--max_number_of_steps={steps}')
    assert (summary['num_ps'], summary['num_workers']) == (2, 10)
    assert len(injected(summary, 'worker')) == 3
    [critical] = injected(summary, 'worker_in_critical_section')
    assert critical['inside_offer_of_version'] >= 0
    [ps] = injected(summary, 'ps')
    assert 0 <= ps['steps_redone'] <= ps['at_step']
    assert summary['final_step'] == steps
    # Restored with global_step at the ps restart, so they cover the whole run.
    assert summary['sync_counters'] == {'global_step': steps, 'updates_applied': steps,
                                        'gradients_applied': 8 * steps, 'exact': True}
    stopped = lines_with_error((log_dir / 'chief.log').read_text())
    assert len(stopped) == 1 and stopped[0].startswith(
        f'ERROR: ps task {ps["task"]} (127.0.0.1:'), stopped


@pytest.mark.slow  # 10 processes on 2 cores: ~2 min
def test_async_ps_2_ps_8_workers_checkpoints_advance_and_the_last_evaluates(tmp_path,
                                                                           shapes_data):
    steps = 1500  # ~0.03 s a step: long enough for restarted workers to rejoin
    summary, log_dir = run_chaos(tmp_path, shapes_data, '--mode=async_ps', '--evaluate',
                                 f'--max_number_of_steps={steps}')
    assert (summary['num_ps'], summary['num_workers']) == (2, 8)
    assert len(injected(summary, 'worker')) == 4 and len(injected(summary, 'ps')) == 1
    assert summary['final_step'] == steps and summary['eval_status'] == 0
    for log in sorted(log_dir.glob('chief*.log')):
        saved = [int(s) for s in re.findall(r'Saved checkpoint .*model\.ckpt-(\d+)\.',
                                            log.read_text())]
        assert saved == sorted(set(saved)), (log.name, saved)
    assert saved[-1] == steps
    assert (log_dir / 'eval' / 'metrics.json').exists()


@pytest.mark.slow  # two 4-worker clusters, one with a restart: ~1.5 min
def test_all_reduce_4_workers_one_killed_the_rest_stop_and_the_restart_resumes_exactly(
        tmp_path, shapes_data):
    steps = 200
    summary, log_dir = run_chaos(tmp_path, shapes_data, '--mode=all_reduce',
                                 '--compare_uninterrupted', f'--max_number_of_steps={steps}')
    [fault] = injected(summary, 'worker')
    assert 0 <= fault['steps_redone'] <= fault['at_step']
    survivors = [f'worker{i}' for i in range(1, 4) if i != fault['task']] + ['chief']
    for name in survivors:
        [line] = lines_with_error((log_dir / f'{name}.log').read_text())
        assert line.startswith('ERROR: worker task ') and 'stopped answering' in line, line
    assert summary['final_step'] == steps
    assert summary['identical_to_uninterrupted'] is True
