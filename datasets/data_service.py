"""Input through TensorFlow's tf.data service: the training pipeline runs on data
workers, handed out file by file by a dispatcher (dynamic sharding), and every training
worker reads its batches from one shared job.

Client side (`ServiceConfig`, `register`, `read`): the input pipeline registers its
dataset under an id every training worker of a run computes alike, so they all join one
job; the dispatcher hands each file of the split to one data worker per epoch, so across
all training workers each example is read once per epoch. Server side
(`serve_dispatcher`, `serve_worker`): the two kinds of task, each running until SIGTERM
or SIGINT.

The dispatcher journals its state (datasets, jobs, the files handed out) in its work
directory before it answers (TensorFlow's fault-tolerant mode): killed and restarted on
the same port and directory, it resumes the jobs, the data workers register again and
the training workers go on reading, each example still once per epoch (measured).

Every wait is bounded: TensorFlow's client and WorkerServer retry an unreachable
dispatcher for an hour (the WorkerServer holding the GIL meanwhile, measured), so the
dispatcher is first probed with a TCP connect, then with a registration on a thread;
while it runs, a watchdog asks the dispatcher for its data workers every second and
ends the process in one line once it, or one of its data workers, has been away for
wait_secs (datasets.data_service_watch).
"""
import dataclasses
import hashlib
import os
import re
import signal
import socket
import threading
import time
from typing import Callable, Optional

import tensorflow as tf
from absl import logging

from core.errors import UsageError, tensorflow_reason
from datasets import data_service_watch

service_lib = tf.data.experimental.service
# grpc://host:port, host a name, an IPv4 address or a bracketed IPv6 one.
_ADDRESS = re.compile(r'^(?:grpc://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):(\d+)$')
# Consumers of one run read one job of the registered dataset (its id names the run).
_JOB_NAME = 'train'
# An empty dataset registered to check that a dispatcher answers (see serve_worker).
_PROBE_DATASET_ID = 'dispatcher-probe'
_POLL_SECS = 0.5
# The journal's directory under the dispatcher's work_dir (TensorFlow's name).
_JOURNAL = 'tf_data_dispatcher_journal'


def parse_address(address: str, flag: str = '--data_service_address') -> tuple:
    """(host, port) of 'grpc://host:port' (the scheme may be left out); UsageError if
    malformed."""
    match = _ADDRESS.match(address or '')
    if not match or not 0 < int(match.group(2)) < 65536:
        raise UsageError(f'{flag}={address!r} is not grpc://host:port (e.g. '
                         'grpc://10.0.0.5:5050); pass the address the dispatcher serves at.')
    return match.group(1), int(match.group(2))


@dataclasses.dataclass(frozen=True)
class ServiceConfig:
    """Where the dispatcher is, and the run whose training workers share one job."""
    address: str           # grpc://host:port of the dispatcher
    run_name: str          # the same on every training worker of one run, unique per run
    wait_secs: float = 60.0  # how long to wait for the dispatcher at start

    def __post_init__(self):
        host, port = parse_address(self.address)
        object.__setattr__(self, 'address', f'grpc://{host}:{port}')
        if not self.run_name:
            raise ValueError('ServiceConfig needs a run_name.')
        if self.wait_secs <= 0:
            raise UsageError(f'--wait_for_data_service_secs must be positive, got '
                             f'{self.wait_secs}.')

    @property
    def host_port(self) -> str:
        return self.address.split('://', 1)[1]

    def dataset_id(self, *fingerprinted) -> str:
        """The id every training worker registers the same pipeline under: the run and a
        digest of what defines the pipeline (so a changed pipeline is a new dataset)."""
        digest = hashlib.sha1(repr((self.run_name,) + fingerprinted).encode()).hexdigest()
        return f'{_JOB_NAME}-{digest[:16]}'

    def describe(self) -> str:
        return (f'tf.data service at {self.address}, dynamic sharding: each example once '
                'per epoch across workers (files handed out one at a time)')


def wait_for_dispatcher(address: str, wait_secs: float, who: str):
    """Returns once something accepts connections at the dispatcher's address; one line
    (UsageError) after wait_secs."""
    host_port = address.split('://', 1)[-1]
    deadline = time.monotonic() + wait_secs
    while not data_service_watch.is_reachable(host_port):
        if time.monotonic() > deadline:
            raise UsageError(
                f'No tf.data dispatcher answers at {address} (waited {wait_secs:g} s) for '
                f'{who}; start it first (train_image_classifier.py '
                f'--job_name=data_dispatcher --data_service_address={address}) or fix '
                '--data_service_address.')
        time.sleep(_POLL_SECS)


def set_fault_handler(handler: Callable[[str], None]):
    """What a training worker's watchdog calls with its line (default:
    data_service_watch.report_fault_and_exit)."""
    global _fault_handler  # pylint: disable=global-statement
    _fault_handler = handler


_fault_handler = data_service_watch.report_fault_and_exit


def _bounded(call, address: str, wait_secs: float):
    """call() on a thread (TensorFlow's RPCs release the GIL), at most wait_secs."""
    outcome = {}

    def run():
        try:
            outcome['value'] = call()
        except Exception as error:  # pylint: disable=broad-except
            outcome['error'] = error

    thread = threading.Thread(target=run, daemon=True, name='data-service-register')
    thread.start()
    thread.join(wait_secs)
    if thread.is_alive():  # the thread is left behind; the script exits without joining it
        raise UsageError(
            f'Something listens at {address} but did not answer as a tf.data dispatcher '
            f'within {wait_secs:g} s; check --data_service_address (the dispatcher\'s port, '
            'not a ps or worker task\'s).')
    if 'error' in outcome:
        raise outcome['error']
    return outcome['value']


def register(dataset: tf.data.Dataset, service: ServiceConfig, dataset_id: str) -> str:
    """Registers dataset under dataset_id (kept if already there: the first training
    worker's registration serves them all); returns the id. Then watches the service
    for the rest of the process (data_service_watch.watch)."""
    wait_for_dispatcher(service.address, service.wait_secs, 'the training input')

    def call():
        return service_lib.register_dataset(service.address, dataset,
                                            dataset_id=dataset_id).numpy().decode()

    try:
        registered = _bounded(call, service.address, service.wait_secs)
    except tf.errors.InvalidArgumentError as error:
        if 'same structure' not in str(error):
            raise
        raise UsageError(
            f'The tf.data service at {service.address} holds another input under '
            f'{dataset_id}: the training workers of one run must pass the same data flags '
            '(--dataset_*, --batch_size, preprocessing); give them the same flags.') from None
    except tf.errors.OpError as error:
        raise UsageError(f'Registering the input with the tf.data service at '
                         f'{service.address} failed ({tensorflow_reason(error)}); check the '
                         'dispatcher\'s log.') from None
    # Reading blocks inside TensorFlow while the dispatcher is away (for an hour) or no
    # data worker serves (for ever): the watchdog bounds both.
    data_service_watch.watch(service.address, service.wait_secs,
                             lambda line: _fault_handler(line))  # the one set by then
    return registered


def read(service: ServiceConfig, dataset_id: str,
         element_spec) -> tf.data.Dataset:
    """The registered dataset's elements, from the run's one shared job, split
    dynamically over the data workers."""
    return service_lib.from_dataset_id(
        processing_mode=service_lib.ShardingPolicy.DYNAMIC, service=service.address,
        dataset_id=dataset_id, element_spec=element_spec, job_name=_JOB_NAME)


# --- Server side: the dispatcher and the data workers. ---

def _check_port_free(port: int, role: str, flag: str):
    """One line if the port is taken (TensorFlow would log a gRPC error and raise)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(('', port))
        except OSError:
            raise UsageError(f'Port {port} of the {role} ({flag}) is already in use; stop '
                             f'what holds it or give the {role} another port.') from None


def _serve_until_stopped(server, what: str, stop: Optional[threading.Event] = None,
                         each_poll: Callable[[], None] = lambda: None):
    """Blocks until SIGTERM or SIGINT (or `stop` is set), calling each_poll meanwhile,
    then returns: the caller exits 0; the server goes with the process."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda number, frame: stop.set())
    while not stop.wait(_POLL_SECS):
        each_poll()
    logging.info('%s stopped.', what)
    del server  # referenced until here


def serve_dispatcher(address: str, work_dir: Optional[str],
                     stop: Optional[threading.Event] = None):
    """Runs a tf.data dispatcher on address's port until SIGTERM or SIGINT, journaling
    its state in work_dir: started again on the same port and work_dir (after a crash,
    a kill -9, a rescheduled pod) it resumes where it was."""
    host, port = parse_address(address)
    if not work_dir:
        raise UsageError('--job_name=data_dispatcher needs --data_service_work_dir=DIR, '
                         'a directory of its own where it journals its jobs, so that a '
                         'restarted dispatcher resumes them (e.g. '
                         '--data_service_work_dir=/shared/run1/tf_data_dispatcher).')
    _check_port_free(port, 'tf.data dispatcher', '--data_service_address')
    resuming = tf.io.gfile.exists(os.path.join(work_dir, _JOURNAL))
    try:
        tf.io.gfile.makedirs(work_dir)
        server = service_lib.DispatchServer(service_lib.DispatcherConfig(
            port=port, work_dir=work_dir, fault_tolerant_mode=True))
    except tf.errors.OpError as error:
        raise UsageError(f'The tf.data dispatcher cannot start with --data_service_work_dir='
                         f'{work_dir} ({tensorflow_reason(error)}); give it a writable '
                         'directory of its own (an empty one starts afresh).') from None
    what = f'tf.data dispatcher at grpc://{host}:{port}'
    logging.info('Serving the %s, %s its journal in %s; training and data workers pass '
                 '--data_service_address=grpc://%s:%d. Stop it with SIGTERM or Ctrl-C.',
                 what, 'resuming from' if resuming else 'starting', work_dir, host, port)
    _serve_until_stopped(server, what, stop)


def serve_worker(dispatcher_address: str, worker_address: Optional[str],
                 wait_secs: float = 60.0, stop: Optional[threading.Event] = None):
    """Runs a data worker at worker_address (host:port, the host the training workers
    reach it at) for the dispatcher, until SIGTERM or SIGINT."""
    dispatcher_host, dispatcher_port = parse_address(dispatcher_address)
    dispatcher = f'grpc://{dispatcher_host}:{dispatcher_port}'
    if not worker_address:
        raise UsageError('--job_name=data_worker needs --data_worker_address=host:port: '
                         'the port it serves on, and the host training workers reach it at.')
    host, port = parse_address(worker_address, '--data_worker_address')
    _check_port_free(port, 'data worker', '--data_worker_address')
    wait_for_dispatcher(dispatcher, wait_secs, 'this data worker')
    # WorkerServer would retry a silent dispatcher for an hour holding the GIL: first
    # check, on a thread, that a dispatcher answers.
    probe = tf.data.Dataset.range(0)
    _bounded(lambda: service_lib.register_dataset(dispatcher, probe,
                                                  dataset_id=_PROBE_DATASET_ID),
             dispatcher, wait_secs)
    server = service_lib.WorkerServer(service_lib.WorkerConfig(
        dispatcher_address=f'{dispatcher_host}:{dispatcher_port}',
        worker_address=f'{host}:{port}', port=port))
    what = f'data worker at {host}:{port}'
    logging.info('Serving as the %s of the tf.data dispatcher at %s. Stop it with SIGTERM '
                 'or Ctrl-C.', what, dispatcher)
    stop, faults = stop or threading.Event(), []
    # A dispatcher restarted within wait_secs finds this worker again; one gone longer
    # ends it in one line (TensorFlow would retry for an hour).
    data_service_watch.watch(dispatcher, wait_secs,
                             lambda line: (faults.append(line), stop.set()),
                             need_data_workers=False)
    tasks = [0]

    def log_tasks():  # whether the dispatcher gives it work, e.g. again after a restart
        count = server._num_tasks()  # pylint: disable=protected-access
        if bool(count) != bool(tasks[0]):  # (one task per epoch: not each change)
            logging.info('The %s has %d task(s).', what, count)
        tasks[0] = count

    _serve_until_stopped(server, what, stop, log_tasks)
    if faults:
        raise UsageError(faults[0])
