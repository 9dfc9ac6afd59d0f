"""TensorFlow's own log level, read from the command line before TensorFlow loads
(cli.startup): errors by default, none in a cluster's tasks (whose failures the script
names in one line), and always what --tf_log_level says."""
import pytest

from cli import startup


@pytest.mark.parametrize('argv, environ, level', [
    (['train.py'], {}, 'error'),
    (['train.py', '--worker_hosts=a:1,b:2', '--job_name=worker'], {}, 'none'),
    (['train.py', '--ps_hosts', 'a:1'], {}, 'none'),
    (['train.py'], {'TF_CONFIG': '{"cluster": {}}'}, 'none'),
    (['train.py'], {'SLURM_PROCID': '0', 'SLURM_NTASKS': '4'}, 'none'),
    (['train.py'], {'SLURM_PROCID': '0', 'SLURM_NTASKS': '1'}, 'error'),
    (['train.py', '--job_name=ps', '--tf_log_level=info'], {}, 'info'),
    (['train.py', '--tf_log_level', 'warning'], {}, 'warning'),
    (['train.py', '--tf_log_level=loud'], {}, 'error'),
])
def test_the_level_follows_the_flag_else_whether_this_is_a_cluster_task(argv, environ,
                                                                        level):
    assert startup._requested_level(argv, environ) == level  # pylint: disable=protected-access


def test_tensorflows_objects_are_frozen_out_of_the_collectors_reach():
    """Full collections walked TensorFlow's ~300k objects (0.25 s each, five before the
    first step): after start-up they are frozen, and the collector still runs."""
    import gc  # pylint: disable=import-outside-toplevel
    assert gc.isenabled()
    assert gc.get_freeze_count() > 100_000
