"""Runs recompute_batch_norm_statistics.py as a user types it, and sends the process a
signal at a chosen moment of writing its output, as a user's Ctrl-C, a scheduler's
SIGTERM or the kernel's SIGKILL would:

    run_recompute_killed.py --kill_at=MOMENT --kill_signal=TERM|KILL [the script's flags]

MOMENT is one of
  before_write: the staging folder and its marker exist, no tensor is written;
  after_write:  the tensors are written in the staging folder, not yet read back;
  after_record: the record (batch_norm_statistics.json) is in place, the checkpoint not;
  before_index: the checkpoint's data files are in place, its index not.
The process ends at once (SIGTERM's handler exits without cleaning up, as SIGKILL).
"""
import os
import runpy
import signal
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, 'recompute_batch_norm_statistics.py')
MOMENTS = ('before_write', 'after_write', 'after_record', 'before_index')
USAGE = ('usage: run_recompute_killed.py --kill_at=' + '|'.join(MOMENTS)
         + ' --kill_signal=TERM|KILL [flags]')


def _take(argv, name):
    values = [a.split('=', 1)[1] for a in argv if a.startswith(f'--{name}=')]
    rest = [a for a in argv if not a.startswith(f'--{name}=')]
    return (values[0] if values else None), rest


def _wrap_writes(moment, kill):
    import tensorflow as tf  # imported here: after the script's start-up configured it

    save, rename = tf.raw_ops.SaveV2, tf.io.gfile.rename

    def save_then_maybe_die(**kwargs):
        if moment == 'before_write':
            kill()
        save(**kwargs)
        if moment == 'after_write':
            kill()

    def rename_then_maybe_die(source, target, overwrite=False):
        if moment == 'before_index' and target.endswith('.index'):
            kill()
        rename(source, target, overwrite=overwrite)
        if moment == 'after_record' and target.endswith('batch_norm_statistics.json'):
            kill()

    tf.raw_ops.SaveV2 = save_then_maybe_die
    tf.io.gfile.rename = rename_then_maybe_die


def main():
    moment, argv = _take(sys.argv[1:], 'kill_at')
    signal_name, argv = _take(argv, 'kill_signal')
    if moment not in MOMENTS or signal_name not in ('TERM', 'KILL'):
        sys.exit(USAGE)
    signum = getattr(signal, 'SIG' + signal_name)
    sys.path.insert(0, ROOT)
    from cli import startup  # noqa: F401  (as the script: configures TensorFlow first)
    _wrap_writes(moment, lambda: os.kill(os.getpid(), signum))
    sys.argv = [SCRIPT, *argv]
    runpy.run_path(SCRIPT, run_name='__main__')


if __name__ == '__main__':
    main()
