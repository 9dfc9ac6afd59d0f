"""The error guard every script runs under: user mistakes end in one `ERROR:` line."""
import difflib
import logging
import os
import sys

from absl import app, flags

from cli import startup
from core.errors import (ClusterTaskFailed, TrainingDiverged, UsageError,
                         input_too_small_message)
from datasets import download, input_pipeline
from training.checkpoints import lock


def exit_now(status: int, keep_alive=None):
    """Exits without interpreter teardown, after flushing everything written.

    keep_alive (e.g. a Trainer) is referenced until the exit, so it is never destroyed.

    Destroying a distributed tf.data iterator joins tf.data's autotune threads, which
    wake on a timer of up to 60 s; after training under MirroredStrategy the process
    sat idle for 0-50 s (measured) before exiting. All files are closed by now.
    """
    lock.release_all()  # os._exit runs no atexit handlers
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    del keep_alive  # only its lifetime mattered
    os._exit(status)  # pylint: disable=protected-access


def run(main):
    """A script's entry: absl parses the flags (a flag it cannot parse ends in one
    `ERROR:` line), then main runs guarded."""
    app.run(guarded(main), flags_parser=parse_flags)


def flag_error_message(error: flags.Error, flag_values: flags.FlagValues) -> str:
    """absl's flag error in one line: an unknown flag names the closest known ones."""
    if isinstance(error, flags.UnrecognizedFlagError):
        name = error.flagname
        scored = sorted(((difflib.SequenceMatcher(None, name, known).ratio(), known)
                         for known in flag_values if len(known) > 1), reverse=True)
        # The closest names: up to three, as close as the best (not merely similar).
        close = [known for score, known in scored[:3]
                 if score >= max(0.6, scored[0][0] - 0.05)]
        if name.startswith('no') and name[2:] in flag_values:  # --noX of a non-boolean
            return f'--{name}: --{name[2:]} is not a true/false flag; pass --{name[2:]}=VALUE.'
        if close:
            return (f'Unknown flag --{name}; did you mean '
                    f'{" or ".join("--" + match for match in close)}?')
        return f'Unknown flag --{name}; --help lists this script\'s flags.'
    return ' '.join(str(error).split()) + ' (--help lists this script\'s flags)'


def parse_flags(argv):
    """absl's parsing of argv, for app.run; an unknown flag or a bad value ends in one
    `ERROR:` line and exit status 1 (absl's own is a FATAL line and a hint)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as error:
        sys.stderr.write(f'ERROR: {flag_error_message(error, flags.FLAGS)}\n')
        sys.exit(1)


def guarded(main):
    """Wraps a script's main for app.run: stray arguments, user errors (bad input, failed
    downloads, unimplemented modes) end in one `ERROR:` line and exit status 1.

    Whatever main returns stays alive until the process exits without teardown, so a
    Trainer's iterator is never destroyed (see exit_now).
    """

    def run(argv):
        startup.quiet_python_logging()
        status, result = run_guarded(main, argv)
        exit_now(status, keep_alive=result)

    return run


def run_guarded(main, argv):
    """Runs main(argv) as a script does, without exiting: returns (exit status, what main
    returned). A user error is written to stderr as its one `ERROR:` line (status 1)."""
    try:
        if len(argv) > 1:
            raise UsageError(f'Unexpected arguments {" ".join(argv[1:])}; pass only '
                             f'--flags.')
        return 0, main(argv)
    except (UsageError, NotImplementedError, download.DownloadError,
            TrainingDiverged, ClusterTaskFailed) as error:
        sys.stderr.write(f'ERROR: {error}\n')
        return 1, None
    except Exception as error:  # pylint: disable=broad-except
        message = (input_pipeline.data_error_message(error)  # bad data inside tf.data
                   or input_too_small_message(error))
        if message is None:
            raise
        sys.stderr.write(f'ERROR: {message}\n')
        return 1, None
