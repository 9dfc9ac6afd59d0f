"""TensorFlow's own log level, read from the command line before TensorFlow loads
(cli.startup): none by default (a failure that stops a script is its one `ERROR:`
line), and always what --tf_log_level says."""
import pytest

from cli import startup


@pytest.mark.parametrize('argv, level', [
    (['train.py'], 'none'),
    (['train.py', '--worker_hosts=a:1,b:2', '--job_name=worker'], 'none'),
    (['train.py', '--job_name=ps', '--tf_log_level=info'], 'info'),
    (['train.py', '--tf_log_level', 'warning'], 'warning'),
    (['train.py', '--tf_log_level=error'], 'error'),
    (['train.py', '--tf_log_level=loud'], 'none'),
])
def test_the_level_follows_the_flag_else_none(argv, level):
    assert startup._requested_level(argv) == level  # pylint: disable=protected-access


def test_tensorflows_objects_are_frozen_out_of_the_collectors_reach():
    """Full collections walked TensorFlow's ~300k objects (0.25 s each, five before the
    first step): after start-up they are frozen, and the collector still runs."""
    import gc  # pylint: disable=import-outside-toplevel
    assert gc.isenabled()
    assert gc.get_freeze_count() > 100_000
