"""The tf.data service's flags (a definer listed in cli.flags.GROUPS) and the two server
roles of train_image_classifier.py: `--job_name=data_dispatcher` and
`--job_name=data_worker` serve the service until SIGTERM; any other job trains."""
from absl import flags

from core.errors import UsageError
from datasets import data_service

# As in cli.flags: the flags belong to the script calling define().
flags.disclaim_key_flags()

DISPATCHER, DATA_WORKER = 'data_dispatcher', 'data_worker'
JOB_NAMES = (DISPATCHER, DATA_WORKER)


def data_service_group(define):
    """Input across training workers on TensorFlow's tf.data service."""
    define.string('data_service_address', None, 'grpc://host:port of a tf.data service '
                  'dispatcher. Training: the input pipeline (reading, decoding, '
                  'preprocessing, batching) runs on the service\'s data workers, files '
                  'handed out dynamically so that across all training workers each example '
                  'is read once per epoch. With --job_name=data_dispatcher: serve the '
                  'dispatcher on its port; with --job_name=data_worker: serve a data '
                  'worker for it. Unset: every training worker reads the files itself.')
    define.string('data_worker_address', None, 'With --job_name=data_worker: host:port '
                  'this data worker serves on, the host being the name training workers '
                  'reach it at.')
    define.float('wait_for_data_service_secs', 60, 'How long training workers and data '
                 'workers wait at start for the dispatcher to answer, then stop with an '
                 'error.')


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
        data_service.serve_dispatcher(address)
    else:
        data_service.serve_worker(address, flag_values.data_worker_address,
                                  wait_secs=flag_values.wait_for_data_service_secs)
