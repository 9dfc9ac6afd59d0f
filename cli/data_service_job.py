"""The tf.data service's jobs, train_image_classifier.py's two server roles:
`--job_name=data_dispatcher` and `--job_name=data_worker` serve the service (its flags:
the tf.data service group, cli.flag_groups.data) until SIGTERM; any other job trains."""
import sys

from absl import flags

from cli import guard
from core.errors import UsageError
from datasets import data_service

DISPATCHER, DATA_WORKER = 'data_dispatcher', 'data_worker'
JOB_NAMES = (DISPATCHER, DATA_WORKER)


def _exit_on_fault(line: str):
    """A training worker's end when the service fails it (its main thread may be blocked
    in TensorFlow waiting for input): the guard's one line and exit, lock released."""
    sys.stderr.write(f'ERROR: {line}\n')
    guard.exit_now(1)


# Scripts that train through the service import this module: their watchdog ends them so.
data_service.set_fault_handler(_exit_on_fault)


def serves_data(flag_values: flags.FlagValues = flags.FLAGS) -> bool:
    """Whether this process is a dispatcher or a data worker, not a trainer."""
    return flag_values.job_name in JOB_NAMES


def serve(flag_values: flags.FlagValues = flags.FLAGS):
    """Runs this process's server role until SIGTERM or SIGINT."""
    address = flag_values.data_service_address
    if not address:
        raise UsageError(f'--job_name={flag_values.job_name} needs '
                         '--data_service_address=grpc://host:port, the dispatcher\'s '
                         'address.')
    if flag_values.job_name == DISPATCHER:
        data_service.serve_dispatcher(address, flag_values.data_service_work_dir)
    else:
        data_service.serve_worker(address, flag_values.data_worker_address,
                                  wait_secs=flag_values.wait_for_data_service_secs)
