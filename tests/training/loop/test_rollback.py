"""training.loop.rollback: a diverged call rolled back to the last good checkpoint and
run again, counted in a row, the count restarting after a save past the divergence, and
the one line after --divergence_retries. Fakes for the inner loop and the checkpoints;
TensorFlow only where a real checkpoint is restored."""
import logging
import math
import types

import numpy as np
import pytest
import tensorflow as tf

from core.errors import TrainingDiverged
from deployment import plan as plan_lib
from deployment.steps import StepResult
from training.loop import rollback
from training.loop.train_config import TrainConfig


class FakeTraining:
    """A step counter, a checkpoint list, and an inner loop whose call i returns
    losses[i] (1.0 past the list); restore(path) sets the step to the path's."""

    def __init__(self, losses, checkpoints=()):
        self.losses = list(losses)
        self.checkpoints = list(checkpoints)  # steps saved, oldest first
        self.step = 0
        self.calls = []
        self.restored = []

    def train_n_steps(self, num_steps):
        loss = self.losses[len(self.calls)] if len(self.calls) < len(self.losses) else 1.0
        self.calls.append((self.step, num_steps))
        self.step += num_steps
        return StepResult(metrics={'total_loss': loss, 'learning_rate': 0.1}, images=None)

    def last_good(self):
        return f'/runs/a/model.ckpt-{self.checkpoints[-1]}' if self.checkpoints else None

    def restore(self, path):
        self.restored.append(path)
        self.step = int(path.rsplit('-', 1)[1])

    def guard(self, retries=3, upper_bound=1e6, **extra):
        return rollback.DivergenceRollback(
            self.train_n_steps, retries=retries, upper_bound=upper_bound,
            last_good=self.last_good, restore=self.restore,
            current_step=lambda: self.step, **extra)


def _messages(caplog):
    return [record.getMessage() for record in caplog.records]


def test_a_finite_call_passes_through():
    training = FakeTraining([2.0], checkpoints=[0])
    result = training.guard()(5)
    assert result.metrics['total_loss'] == 2.0
    assert training.calls == [(0, 5)] and training.restored == []


def test_a_diverged_call_rolls_back_once_logs_one_line_and_runs_again(caplog):
    training = FakeTraining([1.0, math.nan, 0.5], checkpoints=[10])
    guard = training.guard()
    guard(10)
    with caplog.at_level(logging.INFO, logger='absl'):
        result = guard(7)  # steps 10 -> 17 diverge; 10 -> 17 again from the checkpoint
    assert result.metrics['total_loss'] == 0.5
    assert training.calls == [(0, 10), (10, 7), (10, 7)]
    assert training.restored == ['/runs/a/model.ckpt-10']
    assert _messages(caplog) == [
        'Loss became nan at step 17: rolled back to model.ckpt-10 (rollback 1 of 3); '
        'reading on past the batches since.']
    assert guard.in_a_row == 1 and guard.rollbacks == 1


def test_a_loss_above_the_bound_counts_as_diverged(caplog):
    training = FakeTraining([2e6], checkpoints=[0])
    with caplog.at_level(logging.WARNING, logger='absl'):
        training.guard(upper_bound=1e6)(4)
    assert training.restored == ['/runs/a/model.ckpt-0']
    assert _messages(caplog)[0].startswith(
        'Loss became 2e+06 (above --loss_upper_bound=1e+06) at step 4: rolled back')


def test_non_finite_weights_after_a_finite_loss_count_as_diverged(caplog):
    """A step's loss is taken before its update: the weights show a NaN batch first."""
    training = FakeTraining([1.5, 1.0], checkpoints=[0])
    finite = iter([False, True])
    with caplog.at_level(logging.WARNING, logger='absl'):
        training.guard(weights_finite=lambda: next(finite))(3)
    assert training.restored == ['/runs/a/model.ckpt-0'] and len(training.calls) == 2
    assert _messages(caplog) == [
        'Weights became non-finite (the loss was 1.5) at step 3: rolled back to '
        'model.ckpt-0 (rollback 1 of 3); reading on past the batches since.']


def test_the_weights_are_read_only_when_the_loss_passes():
    training = FakeTraining([math.nan, 1.0], checkpoints=[0])
    reads = []
    training.guard(weights_finite=lambda: reads.append(1) or True)(3)
    assert len(reads) == 1  # the rerun's, not the diverged call's


def test_k_rollbacks_in_a_row_then_the_one_line_naming_the_retries():
    training = FakeTraining([math.nan] * 5, checkpoints=[20])
    training.step = 20
    with pytest.raises(TrainingDiverged) as error:
        training.guard(retries=2)(5)
    assert str(error.value) == (
        'Loss became nan by step 25 after 2 rollback(s) in a row (--divergence_retries=2); '
        'the last good checkpoint is /runs/a/model.ckpt-20; lower --learning_rate (or '
        'check the input data) and train again.')
    assert len(training.calls) == 3 and len(training.restored) == 2


def test_without_a_checkpoint_it_stops_with_todays_line():
    training = FakeTraining([math.inf])
    with pytest.raises(TrainingDiverged) as error:
        training.guard()(3)
    assert str(error.value) == (
        'Loss became inf by step 3; no checkpoint was saved before it; lower '
        '--learning_rate (or check the input data) and train again.')
    assert training.restored == []


@pytest.mark.parametrize('saved', [15, 20])
def test_a_checkpoint_saved_at_or_past_the_divergence_restarts_the_count(saved):
    # Diverges at 15 (back to 10), passes 15, a save at 15 or 20, diverges at 25: a new
    # row.
    training = FakeTraining([1.0, math.nan, 1.0, 1.0, math.nan, 1.0], checkpoints=[10])
    guard = training.guard(retries=1)
    guard(10)
    guard(5)                    # 10 -> 15 diverged, rolled back, 10 -> 15 again
    assert guard.in_a_row == 1
    guard(5)                    # 15 -> 20
    training.checkpoints.append(saved)
    guard(5)                    # 20 -> 25 diverged: back to the save, not 2 in a row
    assert training.restored == ['/runs/a/model.ckpt-10', f'/runs/a/model.ckpt-{saved}']
    assert guard.in_a_row == 1 and guard.rollbacks == 2


def test_a_checkpoint_short_of_the_divergence_keeps_the_count():
    # Diverges at 15 (back to 10), a save at 12 before the next divergence at 17.
    training = FakeTraining([math.nan, 1.0, math.nan], checkpoints=[10])
    training.step = 10
    guard = training.guard(retries=1)
    guard(5)
    training.step, training.checkpoints = 12, [10, 12]
    with pytest.raises(TrainingDiverged, match='after 1 rollback'):
        guard(5)


def test_another_workers_divergence_rolls_back_here_too(caplog):
    training = FakeTraining([1.0], checkpoints=[4])
    training.step = 4
    answers = iter([True, False])  # the first call diverged on another worker
    with caplog.at_level(logging.WARNING, logger='absl'):
        training.guard(any_worker=lambda diverged: next(answers))(2)
    assert training.calls == [(4, 2), (4, 2)]
    assert _messages(caplog) == [
        'Loss became non-finite or too large on another worker at step 6: rolled back to '
        'model.ckpt-4 (rollback 1 of 3); reading on past the batches since.']


def test_weights_finite_reads_every_variable():
    variables = [tf.Variable([1.0, 2.0]), tf.Variable([[3.0]])]
    weights_finite = rollback.weights_finite_of(variables)
    assert weights_finite()
    variables[1].assign([[math.inf]])
    assert not weights_finite()


def _config(tmp_path, **overrides):
    return TrainConfig(train_dir=str(tmp_path), batch_size=1, **overrides)


def test_off_with_no_retries_and_under_sync_replicas(tmp_path, caplog):
    one_device = plan_lib.for_strategy(tf.distribute.get_strategy())
    assert rollback.for_plan(one_device, _config(tmp_path, divergence_retries=0),
                             None, None, None, []) is None
    assert isinstance(rollback.for_plan(one_device, _config(tmp_path), None, None, None,
                                        []), rollback.DivergenceRollback)
    sync_replicas = types.SimpleNamespace(replicas_to_aggregate=2)
    with caplog.at_level(logging.INFO, logger='absl'):
        assert rollback.for_plan(sync_replicas, _config(tmp_path), None, None, None,
                                 []) is None
    assert any('--divergence_retries=3 acts as 0 under sync replicas' in message
               for message in _messages(caplog))


@pytest.mark.parametrize('field, value, fragment', [
    ('divergence_retries', -1, '--divergence_retries=-1 is out of range'),
    ('loss_upper_bound', 0.0, '--loss_upper_bound=0.0 is out of range'),
    ('loss_upper_bound', math.nan, '--loss_upper_bound=nan is out of range'),
])
def test_config_refuses_bad_values(tmp_path, field, value, fragment):
    with pytest.raises(ValueError, match=fragment):
        _config(tmp_path, **{field: value})


def test_restore_leaves_out_what_the_checkpoint_it_is_given_does_not_hold(tmp_path):
    """The rollback checkpoint (without the input position) restores the weights and
    step of a checkpoint written with the position, and the iterator reads on."""
    weights = tf.Variable([1.0, 2.0])
    step = tf.Variable(0, dtype=tf.int64)
    iterator = iter(tf.data.Dataset.range(100))
    full = tf.train.Checkpoint(weights=weights, global_step=step, input_position=iterator)
    next(iterator), next(iterator)
    path = full.save(str(tmp_path / 'model.ckpt'))
    weights.assign([np.nan, np.nan])
    step.assign(9)
    next(iterator)
    rollback.restorer(tf.train.Checkpoint(weights=weights, global_step=step))(path)
    assert weights.numpy().tolist() == [1.0, 2.0] and int(step.numpy()) == 0
    assert int(next(iterator).numpy()) == 3  # read on, not back at 2


def test_a_checkpoint_that_does_not_fit_stops_in_one_line(tmp_path):
    path = tf.train.Checkpoint(other=tf.Variable(1.0)).save(str(tmp_path / 'model.ckpt'))
    restore = rollback.restorer(tf.train.Checkpoint(weights=tf.Variable([1.0])))
    with pytest.raises(TrainingDiverged, match=r'rolling back to .*model.ckpt-1 failed'):
        restore(path)
