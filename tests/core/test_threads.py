"""--inter_op_threads, --intra_op_threads, --gpu_thread_mode, --gpu_thread_count: checked,
then set before TensorFlow starts (this process started it long ago: the setters are
recorded here; tests/e2e/test_device_performance_flags.py sets them for real)."""
import os

import pytest
import tensorflow as tf

from core import threads
from core.errors import UsageError
from core.threads import ThreadConfig


@pytest.fixture(name='recorded')
def fixture_recorded(monkeypatch):
    """{setter: value} of the tf.config.threading setters called; the GPU variables
    unset first."""
    calls = {}
    for name in ('inter_op', 'intra_op'):
        setter = f'set_{name}_parallelism_threads'
        monkeypatch.setattr(tf.config.threading, setter,
                            lambda value, setter=setter: calls.__setitem__(setter, value))
    for variable in (threads.MODE_ENV, threads.COUNT_ENV):
        monkeypatch.delenv(variable, raising=False)
    return calls


def test_the_settings_reach_tensorflow_and_the_gpu_variables(recorded, monkeypatch):
    threads.apply(ThreadConfig(inter_op_threads=2, intra_op_threads=3,
                               gpu_thread_mode='gpu_private', gpu_thread_count=1))
    assert recorded == {'set_inter_op_parallelism_threads': 2,
                        'set_intra_op_parallelism_threads': 3}
    assert (os.environ[threads.MODE_ENV], os.environ[threads.COUNT_ENV]) == (
        'gpu_private', '1')
    monkeypatch.setattr(tf.config.threading, 'get_inter_op_parallelism_threads', lambda: 2)
    assert threads.describe().endswith('GPU thread mode gpu_private, 1 threads')


def test_the_defaults_leave_tensorflow_and_the_environment_alone(recorded, monkeypatch):
    monkeypatch.setenv(threads.MODE_ENV, 'gpu_shared')  # a user's own setting stays
    threads.apply(ThreadConfig())
    assert recorded == {} and os.environ[threads.MODE_ENV] == 'gpu_shared'
    assert threads.COUNT_ENV not in os.environ


@pytest.mark.parametrize('config, message', [
    (dict(inter_op_threads=-1), '--inter_op_threads must be at least 0'),
    (dict(intra_op_threads=-2), '--intra_op_threads must be at least 0'),
    (dict(gpu_thread_mode='private'), 'Unknown --gpu_thread_mode=private'),
    (dict(gpu_thread_count=4), '--gpu_thread_count sizes a GPU thread pool of its own: '
                               'add --gpu_thread_mode=gpu_private or gpu_shared'),
    (dict(gpu_thread_mode='global', gpu_thread_count=4), 'add --gpu_thread_mode'),
    (dict(gpu_thread_mode='gpu_shared', gpu_thread_count=0),
     '--gpu_thread_count must be at least 1'),
])
def test_bad_settings_are_refused(config, message):
    with pytest.raises(UsageError, match=message):
        ThreadConfig(**config)


@pytest.mark.parametrize('config, tasks, cores, expected', [
    (ThreadConfig(), 1, 2, ThreadConfig()),
    (ThreadConfig(), 2, 2, ThreadConfig(1, 1, tasks_sharing_host=2)),
    (ThreadConfig(), 3, 8, ThreadConfig(2, 2, tasks_sharing_host=3)),
    (ThreadConfig(), 4, 2, ThreadConfig(1, 1, tasks_sharing_host=4)),  # one thread at least
    # What the user set stays; only the unset pool is sized.
    (ThreadConfig(inter_op_threads=4), 2, 8, ThreadConfig(4, 4, tasks_sharing_host=2)),
])
def test_tasks_sharing_a_host_split_its_cores(config, tasks, cores, expected):
    assert threads.shared_by(config, tasks, cores) == expected


def test_a_shared_host_is_said_with_the_threads(recorded, caplog):
    del recorded
    with caplog.at_level('INFO'):
        threads.apply(threads.shared_by(ThreadConfig(), 2, 2))
    assert '2 workers of the cluster share this host' in caplog.text
