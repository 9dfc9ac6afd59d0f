"""What must happen before TensorFlow loads: imported first by every script.

TensorFlow reads TF_CPP_MIN_LOG_LEVEL once, when its C++ runtime starts, so the
script's --tf_log_level is read from the command line here, ahead of flag parsing
(cli.flags defines the flag itself, for --help and validation). A few C++ lines that
TensorFlow 2.21 prints while it loads ignore that variable (absl's "All log messages
before absl::InitializeLog()" and oneDNN's notice); they are caught here, during the
import, and dropped unless asked for.

The default is none: TensorFlow logs notices at error level (oneDNN's "supports
DT_UINT8 only on platforms with AVX-512", once per process, the first time an eager
uint8 op such as a transpose runs; a dead peer's gRPC and collective failures in a
cluster), while a failure that stops a script reaches it as an exception, which it
reports in its one `ERROR:` line. --tf_log_level=error shows TensorFlow's error lines.
"""
import gc
import logging
import os
import re
import signal
import sys
import tempfile
import threading

TF_LOG_LEVELS = ('info', 'warning', 'error', 'none')
DEFAULT_TF_LOG_LEVEL = 'none'
_CPP_LEVELS = {'info': '0', 'warning': '1', 'error': '2', 'none': '3'}
_PYTHON_LEVELS = {'info': logging.INFO, 'warning': logging.WARNING,
                  'error': logging.ERROR, 'none': logging.CRITICAL}
# C++ log lines: 'I0000 00:00:1795346499.095548    6621 port.cc:153] ...'.
_CPP_LOG_LINE = re.compile(r'^([IWEF])\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ')
_ABSL_NOT_INITIALIZED = 'WARNING: All log messages before absl::InitializeLog()'
# Python modules whose absl/logging records count as TensorFlow's own.
_TENSORFLOW_PATHS = re.compile(r'[/\\](tensorflow|keras|tensorflow_datasets|tf_keras)[/\\]')


def _requested_level(argv) -> str:
    """--tf_log_level, else the default (none)."""
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
    """Imports TensorFlow with stderr captured, then replays what the level lets through.

    The garbage collector is paused for the import, and TensorFlow's million objects are
    then frozen out of its reach (gc.freeze): they live as long as the process, yet every
    full collection used to walk them all (five during the import and the first step,
    0.40 s of a 3 s start-up; measured on cifarnet), and every later one would again.
    """
    global _stderr_fd
    collecting = gc.isenabled()
    gc.disable()
    sys.stderr.flush()
    saved = _stderr_fd = os.dup(2)
    with tempfile.TemporaryFile(mode='w+b') as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            _stderr_fd = 2
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode('utf-8', 'replace').splitlines(True):
                if _shown(line, level):
                    sys.stderr.write(line)
            sys.stderr.flush()
            gc.freeze()
            if collecting:
                gc.enable()


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


# Set to 'default' to keep glibc's allocator as it is (e.g. to measure the difference).
MALLOC_TUNING_ENV = 'SLIM_MALLOC_TUNING'
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's mallopt parameter numbers


def tune_glibc_malloc() -> bool:
    """Keeps freed memory in the process instead of returning it to the kernel.

    By default glibc serves large blocks with mmap and unmaps them when freed, so every
    step re-faults its big tensors (~250 page faults per image measured; the 2-clone
    CPU demo ran 1.67x faster without them). Must run before TensorFlow allocates.
    Returns whether the tuning is in effect (glibc only; not when disabled by the env).
    """
    if os.environ.get(MALLOC_TUNING_ENV) == 'default' or not sys.platform.startswith('linux'):
        return False
    try:
        import ctypes  # pylint: disable=import-outside-toplevel
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


# The real stderr while TensorFlow's import has fd 2 captured.
_stderr_fd = 2


def _exit_quietly(signum, frame):
    del frame
    message = f'Stopped by signal {signum} outside the training loop; nothing to save.\n'
    os.write(_stderr_fd, message.encode())
    # A train_dir lock taken by now goes too (os._exit runs no atexit handlers).
    lock_module = sys.modules.get('training.checkpoints.lock')
    if lock_module is not None:
        lock_module.release_all()
    os._exit(128 + signum)  # pylint: disable=protected-access


def exit_quietly_on_signals():
    """SIGTERM/SIGINT before training starts (or after its final save) end the process
    with one line, not a KeyboardInterrupt traceback from wherever the start-up was (the
    training loop installs its own handlers, which save first)."""
    # Not under pytest, which handles Ctrl-C itself.
    if threading.current_thread() is threading.main_thread() and 'pytest' not in sys.modules:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, _exit_quietly)


exit_quietly_on_signals()
MALLOC_TUNED = tune_glibc_malloc()
_LEVEL = _requested_level(sys.argv)
os.environ['TF_CPP_MIN_LOG_LEVEL'] = _CPP_LEVELS[_LEVEL]
if _LEVEL == 'none':  # gRPC's core logs on its own (a user's setting stays)
    os.environ.setdefault('GRPC_VERBOSITY', 'NONE')
_import_tensorflow_quietly(_LEVEL)
