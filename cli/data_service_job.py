"""The tf.data service's jobs, train_image_classifier.py's two server roles:
`--job_name=data_dispatcher` and `--job_name=data_worker` serve the service (its flags:
the tf.data service group, cli.flag_groups.data) until SIGTERM; any other job trains."""
from absl import flags

from core.errors import UsageError
from datasets import data_service

DISPATCHER, DATA_WORKER = 'data_dispatcher', 'data_worker'
JOB_NAMES = (DISPATCHER, DATA_WORKER)


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
