"""The tasks that only serve: a parameter-server cluster's ps tasks and the workers the
chief schedules steps on. Each runs its server until the chief is gone, and rides out a
preemption (SIGTERM to every task: a node drain, a SLURM preemption) so that the chief
can still save: the variables live on the ps tasks, and the steps in flight on the
workers.
"""
import logging as python_logging
import signal
import threading
import time
from typing import Callable, Optional

from absl import logging

from deployment import cluster as cluster_lib
from deployment import model_deploy

# A task leaves this long before the grace period ends: its exit is its own, not the
# launcher's SIGKILL.
EXIT_MARGIN_SECS = 2.0


class Preemption:
    """SIGTERM/SIGINT to a serving task: keep serving until the chief has saved and
    exited, for at most the grace period; later signals are logged and ignored."""

    def __init__(self, grace_secs: float, clock: Callable[[], float] = time.monotonic):
        self.grace_secs = grace_secs
        self.clock = clock
        self.received_at: Optional[float] = None
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self.handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def handle(self, signum, frame=None):
        del frame
        if self.received_at is not None:
            logging.warning('Signal %d received again: still serving until the chief has '
                            'saved.', signum)
            return
        self.received_at = self.clock()
        logging.warning('Signal %d received: serving on until the chief has saved and '
                        'exited, for at most %.0f s (--preemption_grace_secs).', signum,
                        self.grace_secs)

    @property
    def requested(self) -> bool:
        return self.received_at is not None

    def expired(self) -> bool:
        return (self.received_at is not None and self.clock() - self.received_at
                >= max(0.0, self.grace_secs - EXIT_MARGIN_SECS))


def serve(config: model_deploy.DeploymentConfig, poll_secs: float = 1.0,
          reachable: Callable[[str], bool] = cluster_lib.is_reachable,
          clock: Callable[[], float] = time.monotonic):
    """Runs this ps or worker task's server until the chief has been unreachable for
    config.wait_for_chief_secs (it finished, or died and did not come back); a chief
    that never appears is waited for model_deploy.CHIEF_START_SECS at least. After
    SIGTERM/SIGINT: until the chief is gone, or the grace period is nearly over."""
    cluster = config.cluster
    model_deploy.start_server(config)
    logging.info('Serving %s task %d at %s for the chief at %s.', cluster.task_type,
                 cluster.task_index, cluster.address, cluster.chief_address)
    # The chief's end breaks this task's connections; TensorFlow logs each at ERROR.
    python_logging.getLogger('tensorflow').setLevel(python_logging.CRITICAL)
    with Preemption(config.preemption_grace_secs, clock) as preemption:
        _serve_until_chief_gone(config, preemption, poll_secs, reachable, clock)


def _serve_until_chief_gone(config, preemption: Preemption, poll_secs: float,
                            reachable: Callable[[str], bool], clock: Callable[[], float]):
    cluster = config.cluster
    task = f'{cluster.task_type} task {cluster.task_index}'
    chief_seen, last_seen = False, clock()
    while True:
        if reachable(cluster.chief_address):
            if not chief_seen:
                logging.info('The chief at %s is up.', cluster.chief_address)
            chief_seen, last_seen = True, clock()
        elif preemption.requested:  # no restarted chief is coming back to this task
            logging.info('The chief at %s is gone: %s exits, preempted.',
                         cluster.chief_address, task)
            return
        elif clock() - last_seen > (config.wait_for_chief_secs if chief_seen else
                                    max(config.wait_for_chief_secs,
                                        model_deploy.CHIEF_START_SECS)):
            logging.info('The chief at %s has been gone for %.0f s: %s exits.',
                         cluster.chief_address, config.wait_for_chief_secs, task)
            return
        if preemption.expired():
            logging.warning('The chief at %s is still up %.0f s after the signal: %s exits '
                            'before --preemption_grace_secs=%g ends.', cluster.chief_address,
                            clock() - preemption.received_at, task,
                            config.preemption_grace_secs)
            return
        time.sleep(poll_secs)
