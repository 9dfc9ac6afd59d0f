"""What must happen before TensorFlow loads: imported first by every script.

TensorFlow reads TF_CPP_MIN_LOG_LEVEL once, when its C++ runtime starts, so the
script's --tf_log_level is read from the command line here, ahead of flag parsing
(cli.flags defines the flag itself, for --help and validation). A few C++ lines that
TensorFlow 2.21 prints while it loads ignore that variable (absl's "All log messages
before absl::InitializeLog()" and oneDNN's notice); they are caught here, during the
import, and dropped unless asked for.
"""
import logging
import os
import re
import sys
import tempfile

TF_LOG_LEVELS = ('info', 'warning', 'error', 'none')
DEFAULT_TF_LOG_LEVEL = 'error'
_CPP_LEVELS = {'info': '0', 'warning': '1', 'error': '2', 'none': '3'}
_PYTHON_LEVELS = {'info': logging.INFO, 'warning': logging.WARNING,
                  'error': logging.ERROR, 'none': logging.CRITICAL}
# C++ log lines: 'I0000 00:00:1795346499.095548    6621 port.cc:153] ...'.
_CPP_LOG_LINE = re.compile(r'^([IWEF])\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ')
_ABSL_NOT_INITIALIZED = 'WARNING: All log messages before absl::InitializeLog()'
# Python modules whose absl/logging records count as TensorFlow's own.
_TENSORFLOW_PATHS = re.compile(r'[/\\](tensorflow|keras|tensorflow_datasets|tf_keras)[/\\]')


def _requested_level(argv) -> str:
    for index, argument in enumerate(argv):
        if argument.startswith('--tf_log_level='):
            value = argument.split('=', 1)[1]
        elif argument == '--tf_log_level' and index + 1 < len(argv):
            value = argv[index + 1]
        else:
            continue
        return value if value in TF_LOG_LEVELS else DEFAULT_TF_LOG_LEVEL
    return DEFAULT_TF_LOG_LEVEL


def _shown(line: str, level: str) -> bool:
    if line.startswith(_ABSL_NOT_INITIALIZED):
        return level == 'info'
    match = _CPP_LOG_LINE.match(line)
    if not match:
        return True
    severity = 'IWEF'.index(match.group(1))
    return severity >= int(_CPP_LEVELS[level])


def _import_tensorflow_quietly(level: str):
    """Imports TensorFlow with stderr captured, then replays what the level lets through."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode='w+b') as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode('utf-8', 'replace').splitlines(True):
                if _shown(line, level):
                    sys.stderr.write(line)
            sys.stderr.flush()


class _TensorFlowRecordFilter(logging.Filter):
    """Drops TensorFlow's own Python log records below the requested level."""

    def __init__(self, level: int):
        super().__init__()
        self.level = level

    def filter(self, record):
        return (record.levelno >= self.level
                or not _TENSORFLOW_PATHS.search(record.pathname or ''))


def quiet_python_logging():
    """TensorFlow's Python-side log lines (e.g. 'Sharding callback duration', one per
    traced all-reduce), kept to --tf_log_level; call it once absl's handler exists."""
    level = _PYTHON_LEVELS[_requested_level(sys.argv)]
    logging.getLogger('tensorflow').setLevel(level)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_TensorFlowRecordFilter(level))


_LEVEL = _requested_level(sys.argv)
os.environ['TF_CPP_MIN_LOG_LEVEL'] = _CPP_LEVELS[_LEVEL]
_import_tensorflow_quietly(_LEVEL)
