"""deployment.sync_replicas_runner.SyncRounds with a scripted coordinator: a closure
whose outputs died with its worker (killed after the closure ended, before the chief
fetched them) is replaced, not raised; a dead ps still ends the round. The cluster runs
are in test_distributed_training.py and test_chaos.py."""
import pytest
import tensorflow as tf

from deployment.sync_replicas_runner import SyncRounds


class _RemoteValue:
    def __init__(self, result):
        self.result = result

    def fetch(self):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


class _Coordinator:
    """Each scheduled closure ends at once with the next scripted result."""

    def __init__(self, results):
        self.results, self.scheduled = list(results), 0

    def schedule(self, steps_fn, args):
        del steps_fn, args
        self.scheduled += 1
        return _RemoteValue(self.results.pop(0))


def _unavailable(task):
    return tf.errors.UnavailableError(
        None, None, f'Socket closed\nAdditional GRPC error information from remote target '
        f'{task}/device:CPU:0 while calling /tensorflow.eager.EagerService/Enqueue')


def _one_round(results):
    coordinator = _Coordinator(results)
    rounds = SyncRounds(coordinator, iterator=None, num_workers=1,
                        global_step=tf.Variable(0, dtype=tf.int64))
    rounds.start(lambda iterator, target: None, num_steps=1)
    return coordinator, rounds


def test_outputs_lost_with_their_worker_are_taken_from_a_replacement():
    coordinator, rounds = _one_round([_unavailable('/job:worker/replica:0/task:1'),
                                      {'loss': 1.5}])
    assert rounds.finish() == {'loss': 1.5}
    assert coordinator.scheduled == 2


def test_a_dead_parameter_server_still_ends_the_round():
    _, rounds = _one_round([_unavailable('/job:ps/replica:0/task:0')])
    with pytest.raises(tf.errors.UnavailableError):
        rounds.finish()
