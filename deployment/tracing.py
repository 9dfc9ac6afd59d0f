"""Profiler traces of training steps, TF2's answer to TF1's FULL_TRACE step stats.

`trace(logdir, addresses, expected_secs)` wraps one call of the step: on one machine it
runs TensorFlow's profiler in this process; in a cluster it asks every task's server
(ps tasks, workers, the chief's own) for a trace over gRPC, since each
`tf.distribute.Server` also serves the profiler. Either way the trace lands in
`<logdir>/plugins/profile/<run>/<host>.xplane.pb`, which TensorBoard's profile tab
opens, showing which ops ran on which task and device.
"""
import contextlib
import threading
import time
from typing import Sequence

import tensorflow as tf
from absl import logging

# A remote trace starts when the request reaches the servers; the step waits this long.
_REMOTE_START_SECS = 0.5
# Time the remote trace runs beyond the step's expected length, for a slow step.
_REMOTE_MARGIN_SECS = 2.0


@contextlib.contextmanager
def trace(logdir: str, addresses: Sequence[str] = (), expected_secs: float = 1.0):
    """Traces what runs inside the block, here or (addresses: 'host:port' of every task)
    on the whole cluster. A trace that fails is logged, never fatal."""
    if not addresses:
        tf.profiler.experimental.start(logdir)
        try:
            yield
        finally:
            tf.profiler.experimental.stop()
        logging.info('Wrote a profiler trace to %s/plugins/profile.', logdir)
        return
    duration_ms = int(1000 * (_REMOTE_START_SECS + expected_secs + _REMOTE_MARGIN_SECS))
    failures = []

    def collect():
        try:
            tf.profiler.experimental.client.trace(
                ','.join(f'grpc://{address}' for address in addresses), logdir,
                duration_ms, num_tracing_attempts=1)
        except Exception as error:  # pylint: disable=broad-except
            failures.append(error)

    collector = threading.Thread(target=collect, daemon=True)
    collector.start()
    time.sleep(_REMOTE_START_SECS)
    yield
    collector.join(timeout=duration_ms / 1000 + 30)
    if failures or collector.is_alive():
        detail = str(failures[0]).splitlines()[0] if failures else 'timed out'
        logging.warning('The profiler trace of %s failed (%s).', ', '.join(addresses),
                        detail)
    else:
        logging.info('Wrote a profiler trace of %d task(s) to %s/plugins/profile.',
                     len(addresses), logdir)
