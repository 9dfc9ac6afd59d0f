"""A parameter server SIGKILLed mid-run, asynchronous and with sync replicas: the
chief's whole output holds exactly one error line, ours, naming the task (none of the
coordinator's, gRPC's or the runtime's own error text, no traceback), and the cluster,
restarted, resumes from the last checkpoint."""
import re

import pytest

from helpers import testing_utils
from helpers.cluster_processes import (TRAIN, free_ports, killed_task_log, lines_with_error,
                                      processes)


@pytest.fixture(scope='module')
def shapes_data(tmp_path_factory):
    directory = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(directory), num_train=64, num_validation=16)
    return directory


@pytest.mark.slow
@pytest.mark.parametrize('mode', [
    pytest.param((), id='async'),
    pytest.param(('--sync_replicas', '--replicas_to_aggregate=2'), id='sync_replicas')])
def test_a_dead_ps_task_is_the_chiefs_one_error_line_and_the_cluster_resumes(
        tmp_path, shapes_data, mode):
    ports = free_ports(4)
    ps_hosts = f'127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}'
    cluster = [f'--ps_hosts={ps_hosts}',
               f'--worker_hosts=127.0.0.1:{ports[2]},127.0.0.1:{ports[3]}',
               '--wait_for_chief_secs=120']
    training = [TRAIN, *cluster, '--job_name=worker', '--task=0', '--dataset_name=shapes',
                f'--dataset_dir={shapes_data}', '--model_name=lenet', '--batch_size=4',
                f'--train_dir={tmp_path / "train"}', '--log_every_n_steps=10',
                '--save_interval_secs=1', *mode]
    with processes(tmp_path) as group:
        for job, task in (('ps', 0), ('ps', 1), ('worker', 1)):
            group.start(f'{job}{task}', [TRAIN, *cluster, f'--job_name={job}',
                                         f'--task={task}'])
        group.start('chief', [*training, '--max_number_of_steps=100000'])
        group.wait_for_log('chief', r'Saved checkpoint .*model\.ckpt-\d+', timeout=180)
        failed = killed_task_log(group, 'ps1', 'chief')
        assert lines_with_error(failed) == [
            f'ERROR: ps task 1 (127.0.0.1:{ports[1]}) stopped answering, so training '
            'stopped; restart that task, then this one: training resumes from the last '
            'checkpoint in --train_dir.'], failed[-3000:]
        latest = int(re.findall(r'Saved checkpoint .*model\.ckpt-(\d+)', failed)[-1])
        group.start('ps1_restarted', [TRAIN, *cluster, '--job_name=ps', '--task=1'])
        group.start('chief_restarted', [*training, f'--max_number_of_steps={latest + 20}'])
        assert group.wait('chief_restarted', timeout=240) == 0, group.log(
            'chief_restarted')[-3000:]
        restarted = group.log('chief_restarted')
    resumed = int(re.search(r'Resumed from .*model\.ckpt-(\d+) at step', restarted).group(1))
    assert resumed >= latest
    assert f'global step {latest + 20}:' in restarted
