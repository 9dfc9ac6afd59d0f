"""Each periodic action of the outer loop, called as the controller calls it
(`action(previous, step, result)`, `before_call`, `finish`): training.loop.actions, and
the summary action of training.summaries.train_summaries. Plain callables and fake
clocks; TensorFlow only where the action writes (a one-variable checkpoint, one summary
file)."""
import logging
import math
import os
import types

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.checkpoint import functional_saver

from core.errors import SaveFailed, TrainingDiverged
from deployment.steps import StepResult
from training.checkpoints import integrity
from training.loop import actions as actions_lib
from training.loop import controller
from training.summaries import train_summaries


class FakeTime:
    """Stands in for the `time` module of the action's module: `monotonic()` is `now`;
    the wall clock `time()` is set back an hour each time it is read, which an interval
    must not notice."""

    def __init__(self):
        self.now = 1000.0
        self.wall = 1.8e9

    def monotonic(self):
        return self.now

    def time(self):
        self.wall -= 3600
        return self.wall


def _result(loss=1.25, skipped=None, images=None):
    metrics = {'total_loss': loss, 'learning_rate': 0.1}
    if skipped is not None:
        metrics['input/skipped_examples'] = skipped
    return StepResult(metrics=metrics, images=images)


def _messages(caplog):
    return [record.getMessage() for record in caplog.records]


# --- WarnSkippedExamples -------------------------------------------------------------

def test_skipped_examples_warn_once_per_new_count(caplog):
    warn = actions_lib.WarnSkippedExamples()
    with caplog.at_level(logging.WARNING, logger='absl'):
        for previous, step, skipped in [(0, 1, None), (1, 2, 0), (2, 3, 3), (3, 4, 3),
                                        (4, 5, 5)]:
            warn(previous, step, _result(skipped=skipped))
    assert _messages(caplog) == ['Skipped 3 unreadable example(s) so far.',
                                 'Skipped 5 unreadable example(s) so far.']


# --- CheckDivergence -----------------------------------------------------------------

def test_a_finite_loss_passes():
    check = actions_lib.CheckDivergence(types.SimpleNamespace(latest_checkpoint=None))
    check(0, 1, _result(loss=1e30))  # large, but finite


@pytest.mark.parametrize('loss, latest, expected', [
    (math.nan, '/runs/a/model.ckpt-40',
     'Loss became nan by step 45; the last good checkpoint is /runs/a/model.ckpt-40; '
     'lower --learning_rate (or check the input data) and train again.'),
    (math.inf, None,
     'Loss became inf by step 45; no checkpoint was saved before it; '
     'lower --learning_rate (or check the input data) and train again.'),
])
def test_a_diverged_loss_raises_naming_the_checkpoint_to_go_back_to(loss, latest,
                                                                     expected):
    check = actions_lib.CheckDivergence(types.SimpleNamespace(latest_checkpoint=latest))
    with pytest.raises(TrainingDiverged) as error:
        check(40, 45, _result(loss=loss))
    assert str(error.value) == expected


def test_a_loss_above_the_bound_raises_naming_the_bound():
    check = actions_lib.CheckDivergence(types.SimpleNamespace(latest_checkpoint=None),
                                        upper_bound=1e6)
    check(0, 2, _result(loss=1e6))  # at the bound: not above it
    with pytest.raises(TrainingDiverged) as error:
        check(2, 3, _result(loss=2.5e6))
    assert str(error.value).startswith(
        'Loss became 2.5e+06 (above --loss_upper_bound=1e+06) by step 3; no checkpoint')


# --- LogLine -------------------------------------------------------------------------

def test_log_line_text_speed_and_eta(caplog):
    pace = controller.Pace(steps_per_loop=100, log_every_n_steps=10, max_steps=20000)
    log_line = actions_lib.LogLine(pace, examples_per_step=32)
    pace.record(1, 30.0)   # the first call: left out of the speed
    pace.record(8, 2.0)
    with caplog.at_level(logging.INFO, logger='absl'):
        log_line(1, 9, _result())      # no log line crossed
        log_line(9, 10, _result())
    # 0.25 s/step; (20000 - 10) * 0.25 s = 4997 s.
    assert _messages(caplog) == [
        'global step 10: loss = 1.2500 (0.250 sec/step, 128.0 examples/sec), lr = 0.1, '
        'ETA 1:23:17']
    assert pace.window_sec_per_step() is None  # the next line measures afresh


def test_log_line_at_the_last_step_and_without_a_measured_speed(caplog):
    pace = controller.Pace(steps_per_loop=100, log_every_n_steps=10, max_steps=25)
    log_line = actions_lib.LogLine(pace, examples_per_step=32)
    pace.record(1, 30.0)
    with caplog.at_level(logging.INFO, logger='absl'):
        log_line(20, 25, _result(loss=0.5))
    assert _messages(caplog) == [
        'global step 25: loss = 0.5000 (includes tracing), lr = 0.1']


def test_log_line_without_max_steps_has_no_eta(caplog):
    pace = controller.Pace(steps_per_loop=100, log_every_n_steps=10, max_steps=None)
    log_line = actions_lib.LogLine(pace, examples_per_step=8)
    pace.record(1, 30.0)
    pace.record(9, 4.5)
    with caplog.at_level(logging.INFO, logger='absl'):
        log_line(1, 10, _result())
    assert _messages(caplog) == [
        'global step 10: loss = 1.2500 (0.500 sec/step, 16.0 examples/sec), lr = 0.1']


# --- CheckpointSaver -----------------------------------------------------------------

@pytest.fixture
def manager(tmp_path):
    """A manager of a one-variable checkpoint, named as the trainer names its own."""
    checkpoint = tf.train.Checkpoint(weight=tf.Variable(3.0))
    return tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=None,
                                      checkpoint_name='model.ckpt')


def _leftovers(train_dir, step):
    return sorted(name for name in os.listdir(train_dir)
                  if name.startswith(f'model.ckpt-{step}'))


def test_saves_once_per_step(tmp_path, manager, monkeypatch, caplog):
    saver = actions_lib.CheckpointSaver(manager, str(tmp_path))
    saves = []
    real_save = manager.save
    monkeypatch.setattr(manager, 'save',
                        lambda **kwargs: saves.append(kwargs) or real_save(**kwargs))
    with caplog.at_level(logging.INFO, logger='absl'):
        saver.save(3)
        saver.save(3)
        saver.save(13)
    assert saves == [{'checkpoint_number': 3}, {'checkpoint_number': 13}]
    assert manager.latest_checkpoint == str(tmp_path / 'model.ckpt-13')
    assert f'Saved checkpoint {tmp_path / "model.ckpt-3"}.' in _messages(caplog)


def test_a_save_that_fails_midway_leaves_nothing_and_keeps_the_previous(
        tmp_path, manager, monkeypatch):
    saver = actions_lib.CheckpointSaver(manager, str(tmp_path))
    saver.save(2)
    previous = manager.latest_checkpoint

    def merge_on_a_full_disk(*args, **kwargs):
        # The shards are in '<prefix>_temp/' by now, as when the disk fills mid-save.
        assert _leftovers(tmp_path, 4) == ['model.ckpt-4_temp']
        raise tf.errors.ResourceExhaustedError(None, None, 'No space left on device')

    monkeypatch.setattr(functional_saver.gen_io_ops, 'merge_v2_checkpoints',
                        merge_on_a_full_disk)
    with pytest.raises(SaveFailed) as error:
        saver.save(4)
    prefix = tmp_path / 'model.ckpt-4'
    assert str(error.value) == (
        f'Saving the checkpoint of step 4 ({prefix}) failed: No space left on device; '
        f'{previous} stays the latest; free space in --train_dir={tmp_path} if the disk '
        f'is full (or pass another --train_dir) and run again to resume.')
    assert _leftovers(tmp_path, 4) == []
    assert tf.train.latest_checkpoint(str(tmp_path)) == previous


def test_a_failed_first_save_says_none_was_saved_and_removes_its_files(
        tmp_path, manager, monkeypatch):
    saver = actions_lib.CheckpointSaver(manager, str(tmp_path))

    def write_a_shard_then_fail(**kwargs):
        (tmp_path / 'model.ckpt-4.data-00000-of-00001').write_bytes(b'partial')
        (tmp_path / 'model.ckpt-4_temp').mkdir()
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(manager, 'save', write_a_shard_then_fail)
    with pytest.raises(SaveFailed, match=r'failed: \[Errno 28\] No space left on device; '
                                         r'no checkpoint was saved before; free space'):
        saver.save(4)
    assert _leftovers(tmp_path, 4) == []


def test_an_error_that_is_not_about_storage_is_not_called_a_failed_save(
        tmp_path, manager, monkeypatch):
    saver = actions_lib.CheckpointSaver(manager, str(tmp_path))

    def broken(**kwargs):
        raise ValueError('a bug, not a full disk')

    monkeypatch.setattr(manager, 'save', broken)
    with pytest.raises(ValueError, match='a bug, not a full disk'):
        saver.save(4)


def test_a_damaged_checkpoint_of_the_same_step_is_set_aside_before_the_save(
        tmp_path, manager, caplog):
    (tmp_path / 'model.ckpt-4.index').write_bytes(b'damaged')
    (tmp_path / 'model.ckpt-4.data-00000-of-00001').write_bytes(b'damaged')
    saver = actions_lib.CheckpointSaver(manager, str(tmp_path))
    with caplog.at_level(logging.INFO, logger='absl'):
        saver.save(4)
    [stamp] = os.listdir(tmp_path / integrity.DAMAGED_DIR)
    assert sorted(os.listdir(tmp_path / integrity.DAMAGED_DIR / stamp)) == [
        'model.ckpt-4.data-00000-of-00001', 'model.ckpt-4.index']
    reader = tf.train.load_checkpoint(str(tmp_path / 'model.ckpt-4'))
    assert reader.get_tensor('weight/.ATTRIBUTES/VARIABLE_VALUE') == 3.0
    assert any('a damaged checkpoint' in message for message in _messages(caplog))


@pytest.mark.parametrize('message, expected', [
    ('{{function_node __wrapped__SaveV2_dtypes_1_device_/job:localhost}} '
     '/t/model.ckpt-4_temp/part-00000-of-00001.data-00000-of-00001.tempstate1; '
     'No space left on device [Op:SaveV2]', 'No space left on device'),
    ('Permission denied; it has a space', 'Permission denied; it has a space'),
    ('Input/output error', 'Input/output error'),
])
def test_save_failure_reason_is_what_the_system_said(message, expected):
    error = tf.errors.UnavailableError(None, None, message)
    assert actions_lib.save_failure_reason(error) == expected


# --- SaveCheckpoints -----------------------------------------------------------------

class FakeSaver:
    def __init__(self):
        self.saved = []

    def save(self, step):
        self.saved.append(step)


def test_saves_every_interval_and_when_training_stops(monkeypatch):
    clock = FakeTime()
    monkeypatch.setattr(actions_lib, 'time', clock)
    saver = FakeSaver()
    saves = actions_lib.SaveCheckpoints(saver, every_secs=60)
    for step, seconds in [(10, 59), (20, 1), (30, 30), (40, 29.5), (50, 31)]:
        clock.now += seconds
        saves(step - 10, step, _result())
    saves.finish(55, _result())
    # 60 s have passed at step 20 (59 + 1), then at step 50 (30 + 29.5 + 31 > 60).
    assert saver.saved == [20, 50, 55]


# --- TraceSteps ----------------------------------------------------------------------

def test_trace_is_due_once_per_period_from_the_step_it_started_at():
    trace = actions_lib.TraceSteps(every=5, step=12, train_dir='unused', addresses=())
    assert [trace.limit(step, 100) for step in (12, 13, 15)] == [3, 2, 5]
    assert trace.limit(16, 2) == 2
    due = [step for step in range(12, 31) if trace.due(step)]
    # Resumed at 12: the period of steps 10-14 is not traced again.
    assert due == [15, 20, 25, 30] and trace.traced_steps == due
    assert not trace.due(30)


# --- WriteSummaries (training.summaries.train_summaries) -----------------------------

class FakeCapture:
    """The capture's interface as the summary action uses it: arming, and what it holds
    (gradients captured at step 7; activations never)."""
    variable_names = ('net/weights',)
    end_point_names = ('Logits',)

    def __init__(self):
        self.armed = []

    def arm(self, step):
        self.armed.append(step)

    def captured(self, strategy):
        del strategy
        return {'gradients_step': 7, 'gradient_histograms': np.array([[[0., 1., 4.]]]),
                'gradient_norms': np.array([0.5]),
                'activations_step': -1, 'activation_histograms': np.zeros((1, 1, 3)),
                'zero_fractions': np.array([0.0])}


class FakeWriter:
    def __init__(self):
        self.closed = False

    def close(self):
        self.closed = True


def _summaries(writer, every_secs, pace, capture, network=None):
    return train_summaries.WriteSummaries(
        writer, every_secs, num_images=1, pace=pace, network=network or tf.Module(),
        capture=capture, strategy=tf.distribute.get_strategy())


def test_summaries_arm_the_capture_for_the_last_step_of_a_due_call(monkeypatch):
    clock = FakeTime()
    monkeypatch.setattr(train_summaries, 'time', clock)
    pace = controller.Pace(100, 100, None)
    capture, writer = FakeCapture(), FakeWriter()
    summaries = _summaries(writer, 60, pace, capture)
    written = []
    summaries._write = lambda previous, step, result, rate: written.append(
        (previous, step, rate))
    pace.record(1, 30.0)
    summaries.before_call(0, 1)            # not due: 0 s passed
    summaries(0, 1, _result())
    clock.now += 60
    pace.record(4, 2.0)
    summaries.before_call(1, 4)            # due: the call's last step is 4
    summaries(1, 5, _result())
    summaries.before_call(5, 4)
    summaries(5, 9, _result())
    summaries.finish(9, _result())
    assert capture.armed == [None, 4, None, None]
    # At step 5 with the speed of the last call (2 steps/sec); the final one at step 9.
    assert written == [(1, 5, 2.0), (9, 9, None)]
    assert writer.closed


def test_summaries_finish_writes_nothing_new_when_the_last_step_has_its_summary(
        monkeypatch):
    clock = FakeTime()
    monkeypatch.setattr(train_summaries, 'time', clock)
    pace = controller.Pace(100, 100, None)
    writer = FakeWriter()
    summaries = _summaries(writer, 0, pace, FakeCapture())
    written = []
    summaries._write = lambda previous, step, result, rate: (
        written.append(step), setattr(summaries, 'written_step', step))
    summaries.before_call(0, 1)
    summaries(0, 1, _result())
    summaries.finish(1, _result())
    assert written == [1] and writer.closed
    empty = _summaries(FakeWriter(), 0, pace, FakeCapture())
    empty._write = lambda *args: pytest.fail('no result to write')
    empty.finish(0, None)  # training stopped before its first call


def test_a_summary_holds_the_metrics_weights_and_captured_gradients(tmp_path,
                                                                     monkeypatch):
    monkeypatch.setattr(train_summaries, 'time', FakeTime())
    network = tf.Module()
    network.weights = tf.Variable(np.arange(4, dtype=np.float32), name='net/weights')
    pace = controller.Pace(100, 100, None)
    summaries = _summaries(tf.summary.create_file_writer(str(tmp_path)), 0, pace,
                           FakeCapture(), network=network)
    images = np.random.default_rng(0).uniform(-1, 1, (2, 4, 4, 3)).astype(np.float32)
    result = StepResult(metrics={'total_loss': 1.5, 'learning_rate': 0.1,
                                 'cross_entropy': 1.4, 'input/skipped_examples': 0.0},
                        images=images)
    summaries.before_call(4, 4)
    summaries(4, 8, result)  # the capture (gradients at step 7) is of this call
    summaries.finish(8, result)
    tags = set()
    for path in tf.io.gfile.glob(f'{tmp_path}/events.out.tfevents.*'):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update((value.tag, event.step) for value in event.summary.value)
    assert tags == {(tag, 8) for tag in (
        'total_loss', 'learning_rate', 'losses/cross_entropy', 'input/skipped_examples',
        'images', 'net/weights', 'net/weights/gradient', 'net/weights/gradient_norm')}
