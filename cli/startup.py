"""What must happen before TensorFlow loads: imported first by every script.

TensorFlow reads TF_CPP_MIN_LOG_LEVEL once, when its C++ runtime starts, so the
script's --tf_log_level is read from the command line here, ahead of flag parsing
(cli.flags defines the flag itself, for --help and validation).
"""
import logging
import os
import sys

TF_LOG_LEVELS = ('info', 'warning', 'error', 'none')
DEFAULT_TF_LOG_LEVEL = 'error'
_CPP_LEVELS = {'info': '0', 'warning': '1', 'error': '2', 'none': '3'}
_PYTHON_LEVELS = {'info': logging.INFO, 'warning': logging.WARNING,
                  'error': logging.ERROR, 'none': logging.CRITICAL}


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


def quiet_python_logging():
    """TensorFlow's Python-side log (e.g. a line per traced all-reduce), to the level."""
    logging.getLogger('tensorflow').setLevel(_PYTHON_LEVELS[_requested_level(sys.argv)])


os.environ['TF_CPP_MIN_LOG_LEVEL'] = _CPP_LEVELS[_requested_level(sys.argv)]
