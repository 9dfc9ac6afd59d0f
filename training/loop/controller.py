"""The outer loop, along Orbit's seam: call the inner loop (`train_n_steps(n)`), then
the periodic actions (training.loop.actions: skipped-example warning, divergence
check, log line, summaries, checkpoint), until the last step or a stop request.

How many steps a call runs: up to --steps_per_loop, ending at the next log line or the
last step, and short enough (MAX_SECONDS_PER_CALL at the measured speed) that a stop
request waits little. The deployment plan makes every worker agree on it (multi-worker
all-reduce), so collectives always pair.
"""
import contextlib
import signal
import threading
import time
from typing import Callable, Optional, Sequence

from absl import logging

from deployment.agreement import CallPlan

# A stop request (SIGTERM, Ctrl-C) waits for the running call of the compiled loop; its
# length is capped so the wait stays short whatever --log_every_n_steps is.
MAX_SECONDS_PER_CALL = 2.0


class StopRequest:
    """Turns SIGTERM/SIGINT into a request to stop when the running call returns. Held
    through the final save too: a second signal (a launcher's, a double Ctrl-C) is
    logged and ignored until the checkpoint is written; once a stop was requested it
    stays ignored, so the process still exits 0 with its checkpoint."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.requested = False
        self.clock = clock
        self.received_at = None  # of the first signal
        self.saving_step = None  # the step whose final checkpoint is being written
        self.saved = False
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        del frame
        if self.saved:
            logging.warning('Signal %d received after the final save of step %d: exiting.',
                            signum, self.saving_step)
        elif self.saving_step is not None:
            logging.warning('Signal %d received while the checkpoint of step %d is written: '
                            'ignored until it is saved.', signum, self.saving_step)
        elif self.requested:
            logging.warning('Signal %d received again: stopping after the running call, '
                            'with a checkpoint.', signum)
        else:
            logging.warning('Signal %d received: saving a checkpoint and stopping.', signum)
            self.received_at = self.clock()
        self.requested = True

    def warn_if_past(self, grace_secs: Optional[float]):
        """After the final save: a stop that outlasted the launcher's grace period would
        have been killed before its checkpoint was written."""
        if grace_secs is None or self.received_at is None:
            return
        took = self.clock() - self.received_at
        if took > grace_secs:
            logging.warning('The final checkpoint was saved %.0f s after the signal, past '
                            '--preemption_grace_secs=%g: a launcher would have killed this '
                            'task first; give it a longer grace period (Kubernetes\' '
                            'terminationGracePeriodSeconds).', took, grace_secs)

    def __exit__(self, *exc):
        if self.requested and exc[0] is None:  # stopping with a checkpoint: stay put
            self.saved = True
            return
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class Pace:
    """Steps per call, and the speed measured since the last log line (the first call,
    which traces the step, and profiled calls left out)."""

    def __init__(self, steps_per_loop: int, log_every_n_steps: int,
                 max_steps: Optional[int]):
        self.steps_per_loop = steps_per_loop
        self.log_every_n_steps = log_every_n_steps
        self.max_steps = max_steps
        self.sec_per_step = None  # of the last measured call
        self.calls = 0
        self.window_steps, self.window_seconds = 0, 0.0

    def next_call(self, step: int) -> int:
        if self.calls == 0:
            return 1
        num_steps = min(self.steps_per_loop,
                        self.log_every_n_steps - step % self.log_every_n_steps)
        if self.max_steps is not None:
            num_steps = min(num_steps, self.max_steps - step)
        if self.sec_per_step:
            num_steps = min(num_steps, max(1, int(MAX_SECONDS_PER_CALL / self.sec_per_step)))
        return num_steps

    def record(self, num_steps: int, seconds: float, measured: bool = True):
        if measured:
            # The first call's time includes tracing: an overestimate, so a safe cap.
            self.sec_per_step = seconds / num_steps
            if self.calls > 0:
                self.window_steps += num_steps
                self.window_seconds += seconds
        self.calls += 1

    def window_sec_per_step(self) -> Optional[float]:
        return self.window_seconds / self.window_steps if self.window_steps else None

    def reset_window(self):
        self.window_steps, self.window_seconds = 0, 0.0


class PacedSteps:
    """run(n): n steps of the inner loop, in calls as long as the Controller makes them
    (Pace), without its actions, agreement or stop request: the loop's own rhythm, for
    a benchmark to time (training.benchmark)."""

    def __init__(self, train_n_steps: Callable[[int], object], *, steps_per_loop: int,
                 log_every_n_steps: int, clock: Callable[[], float] = time.perf_counter):
        self.train_n_steps = train_n_steps
        self.pace = Pace(steps_per_loop, log_every_n_steps, max_steps=None)
        self.clock = clock
        self.step = 0  # steps run so far

    def run(self, num_steps: int):
        end = self.step + num_steps
        while self.step < end:
            call = min(self.pace.next_call(self.step), end - self.step)
            started = self.clock()
            self.train_n_steps(call)  # returns fetched metrics: the steps are done
            self.pace.record(call, self.clock() - started)
            self.step += call


class Controller:
    """Runs the inner loop and the actions; returns (step reached, last result)."""

    def __init__(self, *, train_n_steps: Callable, current_step: Callable[[], int],
                 pace: Pace, agree: Callable[[CallPlan], CallPlan],
                 actions: Sequence, trace=None,
                 clock: Callable[[], float] = time.perf_counter,
                 grace_secs: Optional[float] = None,
                 leave_together: Callable[[], None] = lambda: None):
        self.train_n_steps = train_n_steps
        self.current_step = current_step
        self.pace = pace
        self.agree = agree
        self.actions = list(actions)
        self.trace = trace  # training.loop.actions.TraceSteps, or None
        self.clock = clock  # times each call for the pace (tests pass a fake)
        self.grace_secs = grace_secs  # the launcher's, from SIGTERM to SIGKILL
        # After the last call, before the final save: the workers of a cluster wait for
        # each other (deployment.plan.DeploymentPlan.leave_together).
        self.leave_together = leave_together

    def _next_call(self, step: int, stop: StopRequest):
        num_steps = self.pace.next_call(step)
        tracing = self.trace is not None and self.pace.calls > 0 and self.trace.due(step)
        if tracing:
            num_steps = 1
        elif self.trace is not None:
            num_steps = self.trace.limit(step, num_steps)
        return self.agree(CallPlan(num_steps, stop.requested)), tracing

    def run(self, step: int):
        max_steps, result = self.pace.max_steps, None
        with StopRequest(self.clock) as stop:
            while max_steps is None or step < max_steps:
                call, tracing = self._next_call(step, stop)
                if call.stop:
                    break
                for action in self.actions:  # e.g. the summary arms its capture
                    if hasattr(action, 'before_call'):
                        action.before_call(step, call.num_steps)
                started = self.clock()
                with (self.trace.around(self.pace.sec_per_step) if tracing
                      else contextlib.nullcontext()):
                    result = self.train_n_steps(call.num_steps)
                # A traced step is slower than the others.
                self.pace.record(call.num_steps, self.clock() - started,
                                 measured=not tracing)
                previous_step, step = step, self.current_step()
                for action in self.actions:
                    action(previous_step, step, result)
            self.leave_together()
            stop.saving_step = step
            for action in self.actions:  # the final save among them
                if hasattr(action, 'finish'):
                    action.finish(step, result)
            stop.warn_if_past(self.grace_secs)
        return step, result
