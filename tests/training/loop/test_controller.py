"""The outer loop (training.loop.controller) driven by plain callables: a fake inner loop
that advances a step counter and a fake clock, actions that record when they run, and
an `agree` that stands in for the workers' agreement. No graph is built."""
import logging
import math
import signal
import threading
import types

import pytest

from core.errors import TrainingDiverged
from deployment.agreement import CallPlan
from deployment.steps import StepResult
from training.loop import actions as actions_lib
from training.loop import controller


class FakeClock:
    """Seconds that pass only when the fake inner loop says so; also stands in for the
    `time` module of training.loop.actions (its `monotonic()`)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def monotonic(self):
        return self.now


class FakeInnerLoop:
    """`train_n_steps(n)`: n steps of `sec_per_step` each; call i returns losses[i]."""

    def __init__(self, clock, sec_per_step, losses=(), events=None, during_call=None):
        self.clock = clock
        self.sec_per_step = sec_per_step
        self.losses = list(losses)
        self.events = events if events is not None else []
        self.during_call = during_call  # called with the call's index, e.g. to signal
        self.step = 0
        self.calls = []

    def __call__(self, num_steps):
        index = len(self.calls)
        # A controller that never stops fails here rather than hanging the suite.
        assert index < 1000, 'the controller did not stop'
        self.calls.append(num_steps)
        self.events.append(('call', num_steps))
        if self.during_call is not None:
            self.during_call(index)
        self.clock.now += num_steps * self.sec_per_step
        self.step += num_steps
        loss = self.losses[index] if index < len(self.losses) else 1.0
        return StepResult(metrics={'total_loss': loss, 'learning_rate': 0.1}, images=None)


class RecordingAction:
    """An action with all three hooks, appending what it is called with to `events`."""

    def __init__(self, events, name='action'):
        self.events = events
        self.name = name

    def before_call(self, step, num_steps):
        self.events.append((f'{self.name}.before', step, num_steps))

    def __call__(self, previous, step, result):
        self.events.append((self.name, previous, step))

    def finish(self, step, result):
        loss = result.metrics['total_loss'] if result is not None else None
        self.events.append((f'{self.name}.finish', step, loss))


class FakeSaver:
    def __init__(self):
        self.saved = []

    def save(self, step):
        self.saved.append(step)


def _controller(loop, *, steps_per_loop=100, log_every=100, max_steps=20, actions=(),
                agree=None, trace=None, leave_together=lambda: None):
    pace = controller.Pace(steps_per_loop, log_every, max_steps)
    return controller.Controller(
        train_n_steps=loop, current_step=lambda: loop.step, pace=pace,
        agree=agree or (lambda plan: plan), actions=actions, trace=trace,
        clock=loop.clock, leave_together=leave_together)


# --- How many steps a call runs. -----------------------------------------------------

def test_first_call_is_one_step_then_calls_end_at_each_log_line_and_the_last_step():
    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024)
    step, result = _controller(loop, log_every=10, max_steps=25).run(0)
    assert loop.calls == [1, 9, 10, 5]
    assert step == 25 and result.metrics['total_loss'] == 1.0


def test_calls_never_run_more_than_steps_per_loop():
    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024)
    _controller(loop, steps_per_loop=4, max_steps=10).run(0)
    assert loop.calls == [1, 4, 4, 1]


@pytest.mark.parametrize('steps_per_call, expected', [
    (4, [1, 4, 4, 4, 4, 3]),  # a call lasts MAX_SECONDS_PER_CALL at the measured speed
    (0.5, [1] * 20),          # a step slower than that: one step per call, never zero
])
def test_calls_are_sized_toward_max_seconds_per_call(steps_per_call, expected):
    clock = FakeClock()
    loop = FakeInnerLoop(clock,
                         sec_per_step=controller.MAX_SECONDS_PER_CALL / steps_per_call)
    _controller(loop, max_steps=20).run(0)
    assert loop.calls == expected
    assert clock.now == pytest.approx(20 * loop.sec_per_step)


def test_calls_shrink_when_the_steps_slow_down():
    clock = FakeClock()
    loop = FakeInnerLoop(clock, sec_per_step=controller.MAX_SECONDS_PER_CALL / 8)

    def slow_down(index):
        if index == 2:
            loop.sec_per_step = controller.MAX_SECONDS_PER_CALL / 2

    loop.during_call = slow_down
    _controller(loop, max_steps=20).run(0)
    # Calls 0-1 at 8 steps per 2 s; call 2 (8 steps) runs slow, so the next are 2 steps.
    assert loop.calls == [1, 8, 8, 2, 1]


def test_a_resumed_run_starts_at_its_step_and_stops_at_max_steps():
    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024)
    loop.step = 13
    step, _ = _controller(loop, log_every=10, max_steps=25).run(13)
    assert loop.calls == [1, 6, 5]  # 13 -> 14, to the log line at 20, to 25
    assert step == 25


def test_nothing_runs_when_the_run_is_already_at_max_steps():
    events = []
    loop = FakeInnerLoop(FakeClock(), sec_per_step=0.5, events=events)
    loop.step = 20
    step, result = _controller(loop, max_steps=20,
                               actions=[RecordingAction(events)]).run(20)
    assert (step, result) == (20, None)
    assert events == [('action.finish', 20, None)]


def test_pace_window_leaves_out_the_first_call_and_unmeasured_calls():
    pace = controller.Pace(steps_per_loop=100, log_every_n_steps=100, max_steps=None)
    assert pace.window_sec_per_step() is None
    pace.record(1, 30.0)                   # the first call traces the step
    assert pace.window_sec_per_step() is None and pace.sec_per_step == 30.0
    pace.record(4, 1.0)
    pace.record(1, 9.0, measured=False)    # a profiled call
    assert pace.sec_per_step == 0.25 and pace.calls == 3
    assert pace.window_sec_per_step() == 0.25
    pace.reset_window()
    assert pace.window_sec_per_step() is None
    assert pace.next_call(10) == int(controller.MAX_SECONDS_PER_CALL / 0.25)


def test_agreed_call_length_is_what_runs():
    proposals = []

    def agree(plan):  # as a worker: the chief proposes 3 steps per call
        proposals.append(plan)
        return CallPlan(3, plan.stop)

    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024)
    step, _ = _controller(loop, max_steps=9, agree=agree).run(0)
    assert loop.calls == [3, 3, 3] and step == 9
    assert proposals[0] == CallPlan(1, False)
    assert all(not plan.stop for plan in proposals)


# --- Actions. ------------------------------------------------------------------------

def test_actions_run_in_order_after_every_call_and_finish_once_at_the_end():
    events = []
    plain_calls = []
    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024, losses=[3.0, 2.0, 1.5],
                         events=events)
    actions = [RecordingAction(events, 'first'),
               lambda previous, step, result: plain_calls.append((previous, step)),
               RecordingAction(events, 'second')]
    _controller(loop, log_every=4, max_steps=8, actions=actions).run(0)
    assert events == [
        ('first.before', 0, 1), ('second.before', 0, 1), ('call', 1),
        ('first', 0, 1), ('second', 0, 1),
        ('first.before', 1, 3), ('second.before', 1, 3), ('call', 3),
        ('first', 1, 4), ('second', 1, 4),
        ('first.before', 4, 4), ('second.before', 4, 4), ('call', 4),
        ('first', 4, 8), ('second', 4, 8),
        ('first.finish', 8, 1.5), ('second.finish', 8, 1.5)]
    # An action without before_call/finish is a plain callable.
    assert plain_calls == [(0, 1), (1, 4), (4, 8)]


def test_interval_actions_run_when_their_seconds_have_passed_and_at_the_end(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(actions_lib, 'time', clock)
    saver = FakeSaver()
    loop = FakeInnerLoop(clock, sec_per_step=controller.MAX_SECONDS_PER_CALL / 4)
    saves = actions_lib.SaveCheckpoints(saver, every_secs=3.0)
    _controller(loop, max_steps=20, actions=[saves]).run(0)
    # Steps 1, 5, 9, 13, 17, 20 at 0.5, 2.5, 4.5, 6.5, 8.5, 10 s: a save at 4.5 s and at
    # 8.5 s (>= 3 s after the last), then the final one.
    assert saver.saved == [9, 17, 20]


def test_log_line_at_each_log_interval_and_the_last_step(caplog):
    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024)
    pace = controller.Pace(100, 10, 25)
    log_line = actions_lib.LogLine(pace, examples_per_step=32)
    loop_controller = controller.Controller(
        train_n_steps=loop, current_step=lambda: loop.step, pace=pace,
        agree=lambda plan: plan, actions=[log_line], clock=loop.clock)
    with caplog.at_level(logging.INFO, logger='absl'):
        loop_controller.run(0)
    logged = [r.getMessage() for r in caplog.records if 'global step' in r.getMessage()]
    assert [line.split(':')[0] for line in logged] == [
        'global step 10', 'global step 20', 'global step 25']


# --- Stopping. -----------------------------------------------------------------------

@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason='signal handlers are installed from the main thread only')
@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_after_the_running_call_with_a_final_save(signum, caplog):
    events = []
    saver = FakeSaver()
    before = []

    def previous_handler(received, frame):
        before.append(received)

    def signal_during_the_second_call(index):
        if index == 1:
            signal.raise_signal(signum)

    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024, events=events,
                         during_call=signal_during_the_second_call)
    actions = [RecordingAction(events), actions_lib.SaveCheckpoints(saver, math.inf)]
    old = signal.signal(signum, previous_handler)
    try:
        with caplog.at_level(logging.WARNING, logger='absl'):
            step, _ = _controller(loop, max_steps=1000, actions=actions).run(0)
        restored = signal.getsignal(signum)
    finally:
        signal.signal(signum, old)
    # The call that was running when the signal came finished, its actions ran, and no
    # call followed; the final save is of the step reached.
    assert loop.calls == [1, 99]
    assert events[-2:] == [('action', 1, 100), ('action.finish', 100, 1.0)]
    assert step == 100 and saver.saved == [100]
    # Stopping: later signals stay logged and ignored (the exit stays 0), not the
    # previous handler's.
    assert before == [] and restored is not previous_handler
    assert any(f'Signal {int(signum)} received' in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason='signal handlers are installed from the main thread only')
def test_signals_during_the_final_save_are_logged_and_ignored_until_it_is_written(caplog):
    """Two SIGTERMs: the first stops the loop, the second comes while the final
    checkpoint is written (a launcher's follow-up, a double Ctrl-C) and neither ends the
    process nor skips the save; the log names the step being saved."""
    events = []
    saved = []
    previous = []

    class SaveInterruptedBySignals:
        def __call__(self, previous_step, step, result):
            pass

        def finish(self, step, result):
            signal.raise_signal(signal.SIGTERM)  # mid-save
            signal.raise_signal(signal.SIGTERM)
            saved.append(step)

    def during_call(index):
        if index == 1:
            signal.raise_signal(signal.SIGTERM)

    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024, events=events,
                         during_call=during_call)
    old = signal.signal(signal.SIGTERM, lambda received, frame: previous.append(received))
    try:
        with caplog.at_level(logging.WARNING, logger='absl'):
            step, _ = _controller(loop, max_steps=1000,
                                  actions=[SaveInterruptedBySignals()]).run(0)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert step == 100 and saved == [100] and previous == []
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count('Signal 15 received while the checkpoint of step 100 is written: '
                          'ignored until it is saved.') == 2


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason='signal handlers are installed from the main thread only')
@pytest.mark.parametrize('save_secs, warned', [(5.0, False), (40.0, True)])
def test_a_final_save_past_the_grace_period_is_named(save_secs, warned, caplog):
    """The launcher's SIGKILL comes --preemption_grace_secs after its SIGTERM: a stop
    whose save ends later says so (the save itself is never cut short)."""
    clock = FakeClock()

    class SlowSave:
        def __call__(self, previous_step, step, result):
            pass

        def finish(self, step, result):
            clock.now += save_secs

    def during_call(index):
        if index == 1:
            signal.raise_signal(signal.SIGTERM)

    loop = FakeInnerLoop(clock, sec_per_step=1 / 1024, during_call=during_call)
    pace = controller.Pace(100, 100, 1000)
    old = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with caplog.at_level(logging.WARNING, logger='absl'):
            controller.Controller(
                train_n_steps=loop, current_step=lambda: loop.step, pace=pace,
                agree=lambda plan: plan, actions=[SlowSave()], clock=clock,
                grace_secs=30.0).run(0)
    finally:
        signal.signal(signal.SIGTERM, old)
    past = [r.getMessage() for r in caplog.records if 'past --preemption_grace_secs=30'
            in r.getMessage()]
    assert len(past) == (1 if warned else 0), past


def test_a_stop_agreed_with_the_other_workers_stops_before_the_call():
    events = []
    saver = FakeSaver()

    def agree(plan):  # another worker was asked to stop before the third call
        return CallPlan(plan.num_steps, stop=len(loop.calls) == 2)

    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024, events=events)
    actions = [RecordingAction(events), actions_lib.SaveCheckpoints(saver, math.inf)]
    step, _ = _controller(loop, log_every=10, max_steps=None, actions=actions,
                          agree=agree).run(0)
    assert loop.calls == [1, 9] and step == 10
    assert events[-1] == ('action.finish', 10, 1.0) and saver.saved == [10]


@pytest.mark.parametrize('agreed_stop', [False, True], ids=['last_step', 'agreed_stop'])
def test_workers_leave_together_after_the_last_call_before_the_final_save(agreed_stop):
    events = []

    def agree(plan):
        events.append('agree')
        return CallPlan(plan.num_steps, stop=agreed_stop and len(loop.calls) == 2)

    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024, events=events)
    _controller(loop, log_every=4, max_steps=8, actions=[RecordingAction(events)],
                agree=agree, leave_together=lambda: events.append('leave')).run(0)
    last_call = max(i for i, event in enumerate(events) if event[0] == 'call')
    assert events.count('leave') == 1
    # After the last call's actions (and the stop's agreement), before the final save.
    assert events[last_call + 1:] == (
        [('action', 1, 4), 'agree', 'leave', ('action.finish', 4, 1.0)] if agreed_stop
        else [('action', 4, 8), 'leave', ('action.finish', 8, 1.0)])


def test_workers_do_not_wait_for_each_other_when_training_fails():
    left = []
    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024, losses=[2.0, math.nan])
    with pytest.raises(TrainingDiverged):
        _controller(loop, log_every=4, max_steps=20,
                    actions=[actions_lib.CheckDivergence(types.SimpleNamespace(
                        latest_checkpoint=None))],
                    leave_together=lambda: left.append(True)).run(0)
    assert not left


# --- Errors. -------------------------------------------------------------------------

def test_divergence_raises_naming_the_step_and_skips_the_final_save():
    events = []
    saver = FakeSaver()
    manager = types.SimpleNamespace(latest_checkpoint='/runs/a/model.ckpt-5')
    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024, losses=[2.0, 1.0, math.nan],
                         events=events)
    actions = [actions_lib.CheckDivergence(manager), RecordingAction(events),
               actions_lib.SaveCheckpoints(saver, math.inf)]
    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(TrainingDiverged, match=r'Loss became nan by step 8; the '
                       r'last good checkpoint is /runs/a/model.ckpt-5'):
        _controller(loop, log_every=4, max_steps=20, actions=actions).run(0)
    assert loop.calls == [1, 3, 4]
    # Nothing after the check ran for the diverged call, and nothing was saved.
    assert events[-1] == ('call', 4) and saver.saved == []
    assert not any(event[0] == 'action.finish' for event in events)
    assert signal.getsignal(signal.SIGTERM) is handler


def test_an_error_in_an_action_propagates_and_stops_the_loop():
    events = []
    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024, events=events)

    def failing(previous, step, result):
        if step >= 4:
            raise RuntimeError(f'the action failed at step {step}')

    actions = [failing, RecordingAction(events)]
    with pytest.raises(RuntimeError, match='the action failed at step 4'):
        _controller(loop, log_every=4, max_steps=20, actions=actions).run(0)
    assert loop.calls == [1, 3]
    assert events[-1] == ('call', 3)


def test_an_error_in_the_inner_loop_propagates_without_running_the_actions():
    events = []
    loop = FakeInnerLoop(FakeClock(), sec_per_step=1 / 1024, events=events)

    def fail_second_call(index):
        if index == 1:
            raise OSError('input file vanished')

    loop.during_call = fail_second_call
    with pytest.raises(OSError, match='input file vanished'):
        _controller(loop, max_steps=20, actions=[RecordingAction(events)]).run(0)
    assert events[-2:] == [('action.before', 1, 19), ('call', 19)]


# --- Profiler traces. ----------------------------------------------------------------

def test_traced_steps_are_calls_of_their_own_left_out_of_the_speed():
    clock = FakeClock()
    loop = FakeInnerLoop(clock, sec_per_step=1 / 64)
    trace = actions_lib.TraceSteps(every=5, step=0, train_dir='unused', addresses=())
    around = []

    class SlowWhileTraced:
        def __init__(self, sec_per_step):
            around.append((loop.step, sec_per_step))

        def __enter__(self):
            loop.sec_per_step = 1.0  # profiling slows the step down

        def __exit__(self, *exc):
            loop.sec_per_step = 1 / 64

    trace.around = SlowWhileTraced
    loop_controller = _controller(loop, max_steps=12, trace=trace)
    loop_controller.run(0)
    assert loop.calls == [1, 4, 1, 4, 1, 1]
    assert trace.traced_steps == [5, 10]
    assert around == [(5, 1 / 64), (10, 1 / 64)]
    # Only the untraced calls after the first (4 + 4 + 1 steps) are in the speed.
    assert loop_controller.pace.window_sec_per_step() == 1 / 64
