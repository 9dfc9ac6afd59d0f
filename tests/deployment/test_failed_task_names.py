"""Which task a cluster error names (deployment.runners.describe_failed_task), from the
texts TensorFlow 2.21 gave when a peer died on 127.0.0.1 (shortened)."""
import pytest
import tensorflow as tf

from core.errors import ClusterTaskFailed
from deployment import runners

CLUSTER = {'ps': ['127.0.0.1:4000', '127.0.0.1:4001'],
           'worker': ['127.0.0.1:5000', '127.0.0.1:5001']}


@pytest.mark.parametrize('text, named', [
    # A worker of an all-reduce killed: the collective fails on its address; the op's
    # own device (the reporting worker) comes first in the text and is not the culprit.
    ('{{function_node __wrapped__CollectiveReduceV2_device_/job:worker/replica:0/task:0/'
     'device:CPU:0}} Collective ops is aborted by: failed to connect to all addresses; '
     'last error: UNKNOWN: ipv4:127.0.0.1:5001: Failed to connect to remote host',
     'worker task 1 (127.0.0.1:5001)'),
    # The coordination service's verdict on a worker that stopped its heartbeats.
    ('{{function_node __wrapped__CollectiveReduceV2_device_/job:worker/replica:0/task:0/'
     'device:CPU:0}} Collective ops is aborted by: Error reported from /job:worker/task:0: '
     'The following tasks are unhealthy (stopped sending heartbeats):\n'
     '/job:worker/replica:0/task:1\nThe tasks have crashed.',
     'worker task 1 (127.0.0.1:5001)'),
    ('Socket closed /job:ps/replica:0/task:1', 'ps task 1 (127.0.0.1:4001)'),
    ('no task in this text', 'a task of the cluster'),
])
def test_the_failed_task_is_named_with_its_address(text, named):
    assert runners.describe_failed_task(RuntimeError(text), CLUSTER) == named


def test_unavailable_becomes_one_line_saying_what_to_do():
    with pytest.raises(ClusterTaskFailed) as failure:
        with runners.task_failures_named(CLUSTER, runners.RESTART_ALL_WORKERS):
            raise tf.errors.UnavailableError(None, None, 'ipv4:127.0.0.1:5001: refused')
    assert str(failure.value) == (
        'worker task 1 (127.0.0.1:5001) stopped answering, so training stopped; restart '
        'every worker with the same flags: training resumes from the last checkpoint in '
        '--train_dir.')
    assert failure.value.__cause__ is None and failure.value.__suppress_context__
