"""deployment.task_server: a serving task (ps, or a worker the chief schedules on) rides
out a preemption until the chief has saved, within the grace period. A fake clock and a
fake chief; no server is started (the loop is driven directly)."""
import logging

import pytest

from deployment import cluster as cluster_lib
from deployment import model_deploy, task_server


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _config(**overrides):
    cluster = cluster_lib.Cluster(ps=('127.0.0.1:1',), workers=('127.0.0.1:2', '127.0.0.1:3'),
                                  task_type='ps', task_index=0, source='the test')
    return model_deploy.DeploymentConfig(num_replicas=2, num_ps_tasks=1, cluster=cluster,
                                         **overrides)


def _serve(config, chief_up, clock, events, poll_secs=1.0, monkeypatch=None):
    """Runs the loop; `chief_up(t)` says whether the chief answers at fake time t, and
    `events` maps a fake time to a callable (e.g. a signal) run once when reached."""
    preemption = task_server.Preemption(config.preemption_grace_secs, clock)

    def reachable(address):
        for at in sorted(list(events)):
            if clock.now >= at:
                events.pop(at)(preemption)
        return chief_up(clock.now)

    monkeypatch.setattr(task_server.time, 'sleep', lambda secs: setattr(
        clock, 'now', clock.now + secs))
    task_server._serve_until_chief_gone(config, preemption, poll_secs, reachable, clock)
    return preemption


def test_after_sigterm_the_task_serves_until_the_chief_is_gone_then_exits(
        monkeypatch, caplog):
    clock = FakeClock()
    with caplog.at_level(logging.INFO, logger='absl'):
        _serve(_config(), lambda t: t < 12.0, clock,
               {5.0: lambda p: p.handle(15), 5.5: lambda p: p.handle(15)},
               monkeypatch=monkeypatch)
    # Gone at 12 s: the task leaves at the next poll, not wait_for_chief_secs later.
    assert clock.now == 12.0
    messages = [r.getMessage() for r in caplog.records]
    assert 'Signal 15 received again: still serving until the chief has saved.' in messages
    assert any('is gone: ps task 0 exits, preempted.' in m for m in messages)


def test_a_chief_that_outlives_the_grace_period_is_left_before_it_ends(monkeypatch, caplog):
    clock = FakeClock()
    with caplog.at_level(logging.INFO, logger='absl'):
        _serve(_config(preemption_grace_secs=10.0), lambda t: True, clock,
               {3.0: lambda p: p.handle(15)}, monkeypatch=monkeypatch)
    assert clock.now == pytest.approx(3.0 + 10.0 - task_server.EXIT_MARGIN_SECS)
    assert any('before --preemption_grace_secs=10 ends' in r.getMessage()
               for r in caplog.records)


def test_without_a_signal_a_gone_chief_is_waited_for(monkeypatch):
    """A chief that died may be restarted: the task keeps serving wait_for_chief_secs."""
    clock = FakeClock()
    _serve(_config(wait_for_chief_secs=20.0), lambda t: t < 4.0, clock, {},
           monkeypatch=monkeypatch)
    assert clock.now == pytest.approx(3.0 + 21.0)  # last answered at 3 s; polled each second
