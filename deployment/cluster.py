"""Which tasks make up a training cluster, and which one this process is.

The cluster comes from, in this order:
1. the flags of TF1's distributed trainers: `--ps_hosts=h:p,... --worker_hosts=h:p,...
   --job_name=ps|worker --task=i` (`--task_id` is the same flag);
2. the `TF_CONFIG` environment variable (Kubernetes, TF's own launchers): a `chief` job,
   if listed, becomes worker 0, which is what the chief is in every mode here;
3. SLURM's environment, one task per process: the first --num_ps_tasks tasks of the
   step are the parameter servers, the others the workers in task order, each listening
   on a port counted up from a base port by its rank on its node.
`--kubernetes_service` replaces all three: the cluster is then that of the pod's
Indexed Job or JobSet (deployment.kubernetes), and the cluster flags or TF_CONFIG as
well are a mistake.

Worker 0 is the chief: it runs the training loop (and in parameter-server modes the
coordinator), writes checkpoints and summaries, and logs the plan. All three sources
give the same `Cluster` (so does Kubernetes), so the rest of the program does not know
where it came from.
"""
import dataclasses
import json
import os
import re
import socket
from typing import Dict, Mapping, Optional, Tuple

from core.errors import UsageError
from deployment import kubernetes

PS, WORKER = 'ps', 'worker'
JOB_NAMES = (PS, WORKER)
SLURM_BASE_PORT = 8888  # TF's SlurmClusterResolver's default


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The tasks of a job, {'ps': addresses, 'worker': addresses}, and this task."""
    ps: Tuple[str, ...]
    workers: Tuple[str, ...]
    task_type: str
    task_index: int
    source: str  # where it came from, for the plan log and error messages

    def __post_init__(self):
        if not self.workers:
            raise UsageError(f'The cluster from {self.source} has no worker; list at least '
                             'one (the chief) with --worker_hosts=host:port.')
        if self.task_type not in JOB_NAMES:
            raise UsageError(f'Unknown job {self.task_type!r} from {self.source}; use '
                             f'--job_name=ps or --job_name=worker.')
        count = len(self.addresses(self.task_type))
        if not 0 <= self.task_index < count:
            raise UsageError(
                f'Task {self.task_index} of job {self.task_type!r} is out of range: the '
                f'cluster from {self.source} has {count} {self.task_type} address(es); use '
                f'--task=0..'
                f'{count - 1}.' if count else
                f'This task is a {self.task_type!r} task but the cluster from '
                f'{self.source} has no {self.task_type} addresses; pass '
                f'--{self.task_type}_hosts.')
        for job in JOB_NAMES:
            for address in self.addresses(job):
                _check_address(address, job, self.source)
        duplicates = {a for a in self.ps + self.workers
                      if (self.ps + self.workers).count(a) > 1}
        if duplicates:
            raise UsageError(f'The cluster from {self.source} gives '
                             f'{", ".join(sorted(duplicates))} to more than one task; give every task its own host:port.')

    def addresses(self, job: str) -> Tuple[str, ...]:
        return self.ps if job == PS else self.workers

    @property
    def address(self) -> str:
        """This task's host:port."""
        return self.addresses(self.task_type)[self.task_index]

    def workers_on_this_host(self) -> int:
        """How many of the cluster's workers (this one included) run on this task's host,
        by the host part of their host:port."""
        host = self.address.rsplit(':', 1)[0]
        return sum(address.rsplit(':', 1)[0] == host for address in self.workers)

    @property
    def chief_address(self) -> str:
        return self.workers[0]

    @property
    def is_chief(self) -> bool:
        return self.task_type == WORKER and self.task_index == 0

    def as_dict(self) -> Dict[str, list]:
        """The cluster as tf.train.ClusterSpec takes it (no empty job)."""
        jobs = {WORKER: list(self.workers)}
        if self.ps:
            jobs[PS] = list(self.ps)
        return jobs

    def describe(self) -> str:
        jobs = [f'{job} ' + ', '.join(
            f'{address}{" (chief)" if job == WORKER and i == 0 else ""}'
            for i, address in enumerate(self.addresses(job)))
            for job in (PS, WORKER) if self.addresses(job)]
        return '; '.join(jobs)


def _check_address(address: str, job: str, source: str):
    host, _, port = address.rpartition(':')
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f'{job} address {address!r} from {source} is not host:port, e.g. '
                         'localhost:2222.')


def _split_hosts(value: Optional[str]) -> Tuple[str, ...]:
    return tuple(h.strip() for h in (value or '').split(',') if h.strip())


def from_flags(ps_hosts: Optional[str], worker_hosts: Optional[str],
               job_name: Optional[str], task: int) -> Optional[Cluster]:
    """The cluster of --ps_hosts/--worker_hosts/--job_name/--task, or None if not given."""
    if not (ps_hosts or worker_hosts):
        if job_name:
            raise UsageError(f'--job_name={job_name} needs the cluster: pass --ps_hosts and '
                             '--worker_hosts (or set TF_CONFIG).')
        return None
    if not worker_hosts:
        raise UsageError('--ps_hosts is set but --worker_hosts is not; list the workers '
                         '(the first is the chief) with --worker_hosts=host:port,...')
    return Cluster(ps=_split_hosts(ps_hosts), workers=_split_hosts(worker_hosts),
                   task_type=job_name or WORKER, task_index=task, source='the flags')


def from_tf_config(environ: Mapping[str, str]) -> Optional[Cluster]:
    """The cluster of TF_CONFIG, or None if it is unset or has no cluster."""
    text = environ.get('TF_CONFIG', '').strip()
    if not text:
        return None
    try:
        config = json.loads(text)
        jobs = config.get('cluster') or {}
        task = config.get('task') or {}
    except (ValueError, AttributeError):
        raise UsageError('TF_CONFIG is not a JSON object like {"cluster": {"worker": '
                         '["host:port"], "ps": [...]}, "task": {"type": "worker", '
                         '"index": 0}}; fix or unset it.') from None
    if not jobs:
        return None
    unknown = set(jobs) - {'chief', PS, WORKER, 'evaluator'}
    if unknown:
        raise UsageError(f'TF_CONFIG has job(s) {", ".join(sorted(unknown))}; only chief, '
                         'worker and ps are used.')
    chief = list(jobs.get('chief') or [])
    if len(chief) > 1:
        raise UsageError('TF_CONFIG lists more than one chief; list one.')
    task_type = task.get('type', WORKER)
    task_index = int(task.get('index', 0))
    if task_type == 'evaluator':
        raise UsageError('TF_CONFIG makes this task an evaluator; run '
                         'eval_image_classifier.py on the train_dir instead.')
    if task_type == 'chief':  # the chief is worker 0 here
        task_type, task_index = WORKER, 0
    elif task_type == WORKER and chief:
        task_index += 1
    return Cluster(ps=tuple(jobs.get(PS) or ()), workers=tuple(chief + list(jobs.get(WORKER)
                                                                           or ())),
                   task_type=task_type, task_index=task_index, source='TF_CONFIG')


def expand_hostlist(hostlist: str) -> Tuple[str, ...]:
    """SLURM's compressed host list, e.g. 'gpu[01-03,7],login' -> gpu01 gpu02 gpu03 gpu7 login."""
    hosts = []
    for match in re.finditer(r'([^,\[]+)(?:\[([^\]]*)\])?([^,]*)', hostlist):
        prefix, ranges, suffix = match.groups()
        if ranges is None:
            hosts.append(prefix + suffix)
            continue
        for part in ranges.split(','):
            low, _, high = part.partition('-')
            for number in range(int(low), int(high or low) + 1):
                hosts.append(f'{prefix}{number:0{len(low)}d}{suffix}')
    return tuple(hosts)


def _expand_tasks_per_node(value: str) -> Tuple[int, ...]:
    """SLURM's '2(x3),1' -> (2, 2, 2, 1)."""
    counts = []
    for part in value.split(','):
        match = re.fullmatch(r'(\d+)(?:\(x(\d+)\))?', part.strip())
        if not match:
            raise UsageError(f'Cannot read SLURM_TASKS_PER_NODE={value!r}.')
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return tuple(counts)


def from_slurm(environ: Mapping[str, str], num_ps_tasks: int,
               base_port: int = SLURM_BASE_PORT) -> Optional[Cluster]:
    """The cluster of a SLURM job step with more than one task, or None outside one."""
    if 'SLURM_PROCID' not in environ or int(environ.get('SLURM_NTASKS', '1')) < 2:
        return None
    num_tasks = int(environ['SLURM_NTASKS'])
    nodes = expand_hostlist(environ.get('SLURM_STEP_NODELIST')
                            or environ['SLURM_JOB_NODELIST'])
    per_node = _expand_tasks_per_node(environ.get('SLURM_STEP_TASKS_PER_NODE')
                                      or environ['SLURM_TASKS_PER_NODE'])
    if len(per_node) != len(nodes) or sum(per_node) != num_tasks:
        raise UsageError(f'SLURM lists {len(nodes)} node(s) with {per_node} tasks, not '
                         f'{num_tasks}; run one task per process with srun.')
    # SLURM's block distribution: ranks fill each node in turn.
    addresses = [f'{node}:{base_port + local}'
                 for node, count in zip(nodes, per_node) for local in range(count)]
    if num_ps_tasks >= num_tasks:
        raise UsageError(f'--num_ps_tasks={num_ps_tasks} leaves no worker among the '
                         f'{num_tasks} SLURM tasks; lower it or start more tasks.')
    rank = int(environ['SLURM_PROCID'])
    task_type, task_index = ((PS, rank) if rank < num_ps_tasks
                             else (WORKER, rank - num_ps_tasks))
    return Cluster(ps=tuple(addresses[:num_ps_tasks]),
                   workers=tuple(addresses[num_ps_tasks:]), task_type=task_type,
                   task_index=task_index, source='SLURM')


def from_kubernetes(environ: Mapping[str, str], service: str, port: int,
                    num_ps_tasks: int, num_workers: Optional[int]) -> Cluster:
    """The cluster of this pod's Indexed Job or JobSet (deployment.kubernetes)."""
    hostname = environ.get('HOSTNAME') or socket.gethostname()
    tasks = kubernetes.pod_tasks(environ, hostname, service=service, port=port,
                                 num_ps_tasks=num_ps_tasks, num_workers=num_workers)
    return Cluster(ps=tasks.ps, workers=tasks.workers, task_type=tasks.job,
                   task_index=tasks.index, source=kubernetes.SOURCE)


def _check_one_source(kubernetes_service: str, environ: Mapping[str, str], **flags):
    """--kubernetes_service names the pod's cluster: nothing else may describe it."""
    given = [f'--{name}' for name, value in flags.items() if value]
    if given:
        raise UsageError(f'--kubernetes_service={kubernetes_service} takes the cluster '
                         f'and this task from the pod; drop {", ".join(given)}.')
    if environ.get('TF_CONFIG', '').strip():
        raise UsageError(f'TF_CONFIG and --kubernetes_service={kubernetes_service} both '
                         'describe the cluster; unset TF_CONFIG or drop '
                         '--kubernetes_service.')


def resolve(*, ps_hosts: Optional[str] = None, worker_hosts: Optional[str] = None,
            job_name: Optional[str] = None, task: int = 0, num_ps_tasks: int = 0,
            slurm_base_port: int = SLURM_BASE_PORT, kubernetes_service: Optional[str] = None,
            kubernetes_port: int = kubernetes.DEFAULT_PORT,
            worker_replicas: Optional[int] = None,
            environ: Optional[Mapping[str, str]] = None) -> Optional[Cluster]:
    """The cluster of the pod with --kubernetes_service, else from the flags, else
    TF_CONFIG, else SLURM; None for one machine."""
    environ = os.environ if environ is None else environ
    if kubernetes_service:
        _check_one_source(kubernetes_service, environ, ps_hosts=ps_hosts,
                          worker_hosts=worker_hosts, job_name=job_name, task=task)
        return from_kubernetes(environ, kubernetes_service, kubernetes_port, num_ps_tasks,
                               worker_replicas)
    return (from_flags(ps_hosts, worker_hosts, job_name, task)
            or from_tf_config(environ)
            or from_slurm(environ, num_ps_tasks, slurm_base_port))


def check_port_free(cluster: Cluster):
    """Fails with one line if this task's port is taken (before TensorFlow would abort)."""
    host, _, port = cluster.address.rpartition(':')
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(('', int(port)))
        except OSError:
            raise UsageError(
                f'Port {port} of {cluster.task_type} task {cluster.task_index} '
                f'({cluster.address}, from {cluster.source}) is already in use; stop what '
                'holds it or give this task another port.') from None


def is_reachable(address: str, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections at host:port."""
    host, _, port = address.rpartition(':')
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False
