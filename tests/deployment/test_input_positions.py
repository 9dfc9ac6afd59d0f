"""Each worker's input position beside the chief's checkpoints
(deployment.input_positions): written at the steps the chief's checkpoints are of,
restored only for the very step restored, pruned with the checkpoints. The cluster run
is tests/deployment/test_all_reduce_exact_resume.py (slow)."""
import logging as std_logging

import pytest
import tensorflow as tf

from deployment import input_positions
from deployment import plan as plan_lib
from deployment.model_deploy import MULTI_WORKER, PARAMETER_SERVER
from deployment.agreement import CallPlan, _step_from_parts, _step_parts


def test_a_position_is_complete_once_its_index_is_written():
    names = ['position-12.index', 'position-12.data-00000-of-00001',
             'position-30.data-00000-of-00001',  # a write cut short: no .index
             'position-4.index', 'position-x.index', 'other-7.index']
    assert input_positions.saved_steps(names) == [4, 12]


def test_the_checkpoint_step_is_the_prefix_suffix():
    assert input_positions.checkpoint_step('/t/model.ckpt-120') == 120
    assert input_positions.checkpoint_step(None) is None
    assert input_positions.checkpoint_step('/t/model.ckpt') is None


def test_positions_older_than_every_kept_checkpoint_go():
    assert input_positions.steps_to_remove([4, 12, 20, 30], [12, 20], keep=30) == [4]
    # The chief keeps no checkpoint yet (or its state file is unreadable): keep all.
    assert input_positions.steps_to_remove([4, 12], [], keep=12) == []
    # The position just written stays whatever the state file says.
    assert input_positions.steps_to_remove([4, 12], [20], keep=12) == [4]


@pytest.mark.parametrize('call,step,written,expected', [
    (CallPlan(2, saved_step=40), 40, 20, True),     # the chief saved at this step
    (CallPlan(2, saved_step=40), 40, 40, False),    # written already
    (CallPlan(2, saved_step=20), 40, 20, False),    # the chief's newest is older
    (CallPlan(2, saved_step=None), 40, None, False),
    (CallPlan(0, stop=True), 44, 40, True),         # all stop: the final save's step
    (CallPlan(0, stop=True, saved_step=44), 44, 44, False),
])
def test_a_worker_writes_at_the_chiefs_newest_step_or_where_all_stop(call, step, written,
                                                                    expected):
    assert input_positions.should_write(call, step, written) is expected


@pytest.mark.parametrize('step', [None, 0, 1, 2 ** 20 - 1, 2 ** 20, 123_456_789])
def test_a_step_crosses_the_all_reduce_exactly_as_two_float32_parts(step):
    parts = tf.constant(_step_parts(step), tf.float32).numpy()
    assert _step_from_parts(*parts) == step


class _Worker:
    """One worker's iterator over 0, 1, 2, ... and its step, in this process."""

    def __init__(self, train_dir, worker=1, final_step=None):
        self.step = 0
        self.iterator = iter(tf.data.Dataset.range(1000).shuffle(50, seed=1))
        self.positions = input_positions.WorkerInputPositions(
            train_dir=str(train_dir), worker=worker, num_workers=2,
            iterator=self.iterator, current_step=lambda: self.step, final_step=final_step)

    def read(self, count):
        return [int(next(self.iterator)) for _ in range(count)]


def _write_checkpoint_state(train_dir, steps):
    """The chief's checkpoint state file listing model.ckpt-<step> for each step."""
    (train_dir / 'checkpoint').write_text(
        f'model_checkpoint_path: "model.ckpt-{steps[-1]}"\n'
        + ''.join(f'all_model_checkpoint_paths: "model.ckpt-{s}"\n' for s in steps))


def test_a_restarted_worker_reads_on_from_the_position_of_the_restored_step(tmp_path,
                                                                           caplog):
    first = _Worker(tmp_path)
    first.read(7)
    first.step = 7
    first.positions.after_agreement(CallPlan(3, saved_step=7))
    expected = first.read(5)
    first.step = 12  # went on, then was killed before the next checkpoint

    restarted = _Worker(tmp_path)
    restarted.step = 7  # the model restored from model.ckpt-7
    with caplog.at_level(std_logging.INFO):
        assert restarted.positions.restore()
    assert restarted.read(5) == expected
    assert 'Worker 1 reads on from its input position of step 7.' in caplog.text
    assert (tmp_path / 'input_positions' / 'worker-1-of-2' / 'position-7.index').exists()


def test_no_position_of_the_restored_step_is_a_fresh_shuffle_in_one_line(tmp_path, caplog):
    first = _Worker(tmp_path)
    first.read(7)
    first.step = 7
    first.positions.after_agreement(CallPlan(3, saved_step=7))
    fresh = _Worker(tmp_path / 'other').read(5)

    # A model of step 9 (the worker was killed before writing its position of step 9)
    # never pairs with the position of step 7.
    restarted = _Worker(tmp_path)
    restarted.step = 9
    with caplog.at_level(std_logging.INFO):
        assert not restarted.positions.restore()
    assert restarted.read(5) == fresh
    lines = [r.getMessage() for r in caplog.records if 'position' in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(
        'Worker 1 has no input position for step 9 in '), lines
    assert lines[0].endswith(': reading a fresh shuffle of the data.')


def test_a_fresh_start_reads_no_position_and_says_nothing(tmp_path, caplog):
    worker = _Worker(tmp_path)
    with caplog.at_level(std_logging.INFO):
        assert not worker.positions.restore()
    assert 'position' not in caplog.text


def test_a_position_that_does_not_read_back_is_a_fresh_shuffle_in_one_line(tmp_path,
                                                                          caplog):
    first = _Worker(tmp_path)
    first.step = 5
    first.positions.write(5)
    # Another input (another pipeline's structure) cannot restore it.
    other = input_positions.WorkerInputPositions(
        train_dir=str(tmp_path), worker=1, num_workers=2,
        iterator=iter(tf.data.Dataset.range(10).map(lambda x: (x, x)).batch(2)),
        current_step=lambda: 5)
    with caplog.at_level(std_logging.INFO):
        assert not other.restore()
    assert "Worker 1's input position for step 5 does not fit this input (" in caplog.text
    assert caplog.text.count('reading a fresh shuffle of the data.') == 1


def test_positions_are_pruned_with_the_chiefs_checkpoints(tmp_path):
    worker = _Worker(tmp_path)
    directory = tmp_path / 'input_positions' / 'worker-1-of-2'
    for step in (2, 4, 6):
        worker.step = step
        _write_checkpoint_state(tmp_path, [s for s in (2, 4, 6) if s <= step][-2:])
        worker.positions.after_agreement(CallPlan(1, saved_step=step))
    assert input_positions.saved_steps(p.name for p in directory.iterdir()) == [4, 6]
    assert not list(directory.glob('position-2.*'))


def test_a_cluster_of_another_size_has_no_position(tmp_path):
    worker = _Worker(tmp_path)
    worker.step = 3
    worker.positions.write(3)
    resized = input_positions.WorkerInputPositions(
        train_dir=str(tmp_path), worker=1, num_workers=3, iterator=worker.iterator,
        current_step=lambda: 3)
    assert not resized.restore()


def test_the_last_step_is_written_after_its_call_and_again_after_a_rollback(tmp_path):
    worker = _Worker(tmp_path, final_step=10)
    directory = tmp_path / 'input_positions' / 'worker-1-of-2'
    worker.step = 8
    worker.positions.after_call()  # not the last step: the agreement decides
    assert not directory.exists()
    worker.read(3)
    worker.step = 10
    worker.positions.after_call()
    first = (directory / 'position-10.data-00000-of-00001').read_bytes()
    worker.read(3)  # a rolled-back call reached step 10 again, further on
    worker.positions.after_call()
    assert (directory / 'position-10.data-00000-of-00001').read_bytes() != first
    restarted = _Worker(tmp_path)
    restarted.step = 10
    assert restarted.positions.restore()
    assert restarted.read(2) == worker.read(2)


def test_the_plan_says_where_the_position_is_saved_in_each_mode():
    line = plan_lib._input_position  # pylint: disable=protected-access
    assert line(MULTI_WORKER, True, False, clustered=True).startswith(
        'saved with each checkpoint, each worker its own iterator\'s '
        '(<train_dir>/input_positions/)')
    assert line(MULTI_WORKER, False, False, clustered=True).startswith(
        'not checkpointed (--nocheckpoint_input_position')
    assert line(MULTI_WORKER, False, True, clustered=True).startswith(
        'not checkpointed (the tf.data service\'s job holds it')
    assert line(PARAMETER_SERVER, True, False, clustered=True).startswith(
        'not checkpointed (each worker\'s iterator is its own')


def test_a_failed_write_is_one_warning_and_training_goes_on(tmp_path, caplog):
    (tmp_path / 'input_positions').write_text('a file where the folder goes')
    worker = _Worker(tmp_path)
    worker.step = 4
    with caplog.at_level(std_logging.INFO):
        worker.positions.write(4)
    assert worker.positions.written is None  # nothing written
    warnings = [r.getMessage() for r in caplog.records if r.levelname == 'WARNING']
    assert len(warnings) == 1 and warnings[0].startswith(
        "Could not write worker 1's input position of step 4 to "), warnings
    assert warnings[0].endswith('a resume from that step reads a fresh shuffle on this '
                                'worker.')


def test_a_write_cut_short_leaves_nothing_a_rewrite_would_mix_with(tmp_path):
    worker = _Worker(tmp_path)
    directory = tmp_path / 'input_positions' / 'worker-1-of-2'
    directory.mkdir(parents=True)
    (directory / 'position-6_temp').mkdir()  # a write killed before it merged
    (directory / 'position-6_temp' / 'part-00000-of-00001.index').write_text('x')
    worker.step = 6
    worker.positions.write(6)
    assert sorted(p.name for p in directory.iterdir()) == [
        'position-6.data-00000-of-00001', 'position-6.index']
