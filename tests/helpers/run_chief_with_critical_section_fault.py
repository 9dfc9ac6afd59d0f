"""The chief of a sync-replicas cluster (train_image_classifier.py, as users run it) with
a test-only fault point installed: deployment.sync_replicas.SyncReplicas.fault_point.

    run_chief_with_critical_section_fault.py --fault_worker=W --fault_arm=ARM \
        --fault_marker=MARKER <train_image_classifier.py flags>

Once the file ARM exists, the first time worker W's gradient is taken, W writes MARKER
inside its offer (half of its gradient in the slots, the critical section held) and
blocks there until it is killed. A chief restarted with the same MARKER never blocks
again. scripts/chaos_cluster.py --fault_in_critical_section runs the chief through this.
The fault point's ops are unplaced, so they run on the worker making the offer (as in
tests/helpers/run_sync_replicas_training.py's die_once).
"""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

FAULT_FLAGS = ('--fault_worker=', '--fault_arm=', '--fault_marker=')


def take_fault_flags(argv):
    """(the three values, argv without them); each flag is required."""
    values, rest = {}, []
    for argument in argv:
        flag = next((f for f in FAULT_FLAGS if argument.startswith(f)), None)
        if flag:
            values[flag] = argument[len(flag):]
        else:
            rest.append(argument)
    missing = [f + 'VALUE' for f in FAULT_FLAGS if f not in values]
    if missing:
        sys.exit(f'ERROR: pass {" ".join(missing)}.')
    return int(values['--fault_worker=']), values['--fault_arm='], \
        values['--fault_marker='], rest


VICTIM, ARM, MARKER, sys.argv = take_fault_flags(sys.argv)

import train_image_classifier  # noqa: E402  (first: cli.startup, before TensorFlow loads)
import tensorflow as tf  # noqa: E402

from cli import guard  # noqa: E402
from deployment import sync_replicas  # noqa: E402


def armed_fault_point(victim: int, arm: str, marker: str):
    """fault_point(stage, worker, version, taken): blocks `victim` inside its offer the
    first time its gradient is taken once `arm` exists."""
    blocking_fifo = marker + '.fifo'
    if not os.path.exists(blocking_fifo):
        os.mkfifo(blocking_fifo)

    def fault_point(stage, worker, version, taken):
        if stage != 'offer':
            return tf.constant(0)
        tag = tf.strings.as_string(version)

        def at_run_time(path):
            # A path that depends on a value of the step: Grappler cannot fold (and so
            # run when it optimises the function) an op reading it.
            return tf.strings.join([path, tf.strings.substr(tag, 0, 0)])

        def exists(path):
            return tf.greater(tf.size(tf.io.matching_files(at_run_time(path))), 0)

        def write_and_block():
            with tf.control_dependencies([tf.io.write_file(marker, tag)]):
                # Opening a FIFO nobody writes blocks until the kill.
                return tf.strings.length(tf.io.read_file(at_run_time(blocking_fifo)))

        chosen = taken & tf.equal(worker, tf.constant(victim, tf.int64))
        return tf.cond(chosen & exists(arm) & tf.logical_not(exists(marker)),
                       write_and_block, lambda: tf.constant(0))

    return fault_point


if __name__ == '__main__':
    sync_replicas.SyncReplicas.fault_point = staticmethod(
        armed_fault_point(VICTIM, ARM, MARKER))
    guard.run(train_image_classifier.main)
