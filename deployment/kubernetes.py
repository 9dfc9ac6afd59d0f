"""The tasks of a training cluster, from a pod of a Kubernetes Indexed Job or JobSet:
plain Kubernetes, no TFJob operator and no TF_CONFIG written by hand.

`--kubernetes_service=SERVICE` selects it (deployment.cluster.resolve). Every pod runs
the same command; what tells them apart is what Kubernetes gives each pod:

- **An Indexed Job** (`completionMode: Indexed`): Kubernetes sets JOB_COMPLETION_INDEX
  and names pod i's host `<job>-<i>`; with `subdomain: SERVICE` in the pod template and
  a headless Service of that name, pod i is reachable as `<job>-<i>.SERVICE`
  (kubernetes.io/docs/tasks/job/job-with-pod-to-pod-communication). The first
  --num_ps_tasks indexes are the ps tasks, the next --worker_replicas the workers (as
  under SLURM). One replicated Job of a JobSet (`replicas: 1`) is the same: its pods'
  hosts are `<jobset>-<replicatedJob>-0-<i>`, its subdomain the JobSet's name unless
  `spec.network.subdomain` names another.
- **A JobSet with replicated Jobs `ps` and `worker`** (`replicas: 1` each, completions
  the task counts). JobSet labels each pod with `jobset.sigs.k8s.io/jobset-name` and
  `jobset.sigs.k8s.io/replicatedjob-name` but puts neither in the environment: the pod
  template passes them as JOBSET_NAME and REPLICATED_JOB_NAME (the downward API). Pod i
  of replicated Job r is `<jobset>-r-0-<i>.SERVICE`, after JobSet's
  `<jobSet>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>` (JobSet's docs,
  concepts, "DNS hostnames for Pods"; the label keys are api/jobset/v1alpha2's).

Every task listens on --kubernetes_port. The pod's own host name is checked against
the name the others use for it, so a Job whose pods cannot find each other fails at
start in one line rather than at the first connection.
"""
import dataclasses
from typing import Mapping, Optional, Tuple

from core.errors import UsageError

SOURCE = 'Kubernetes'
DEFAULT_PORT = 2222
INDEX = 'JOB_COMPLETION_INDEX'  # Kubernetes sets it in the pods of an Indexed Job
JOBSET_NAME, REPLICATED_JOB_NAME, JOB_INDEX = 'JOBSET_NAME', 'REPLICATED_JOB_NAME', 'JOB_INDEX'
JOBSET_JOBS = ('ps', 'worker')  # the replicated Jobs' names: TF_CONFIG's job names
COUNT_FLAGS = {'ps': '--num_ps_tasks', 'worker': '--worker_replicas'}


@dataclasses.dataclass(frozen=True)
class PodTasks:
    """Every task's host:port, and which task this pod is."""
    ps: Tuple[str, ...]
    workers: Tuple[str, ...]
    job: str  # 'ps' or 'worker'
    index: int


def pod_tasks(environ: Mapping[str, str], hostname: str, *, service: str, port: int,
              num_ps_tasks: int, num_workers: Optional[int]) -> PodTasks:
    """The cluster this pod belongs to, from its environment and host name."""
    if num_workers is None:
        raise UsageError('--kubernetes_service needs --worker_replicas=M, the number of '
                         'worker pods (and --num_ps_tasks=K if there are ps pods).')
    index = _completion_index(environ)
    counts = {'ps': num_ps_tasks, 'worker': num_workers}
    host = hostname.split('.')[0]
    if environ.get(JOBSET_NAME) or environ.get(REPLICATED_JOB_NAME):
        job, task, hosts = _in_jobset(environ, index, counts, host)
    else:
        job, task, hosts = _in_indexed_job(index, counts, host)
    return PodTasks(ps=_addresses(hosts['ps'], service, port),
                    workers=_addresses(hosts['worker'], service, port), job=job, index=task)


def _completion_index(environ: Mapping[str, str]) -> int:
    value = environ.get(INDEX, '').strip()
    if not value:
        raise UsageError(f'--kubernetes_service needs {INDEX}, which Kubernetes sets in '
                         'the pods of a Job with completionMode: Indexed (a JobSet\'s Jobs '
                         'are Indexed by default); make the Job Indexed.')
    if not value.isdigit():
        raise UsageError(f'{INDEX}={value!r} is not a whole number; leave it to '
                         'Kubernetes (do not set it in the pod template).')
    return int(value)


def _in_indexed_job(index: int, counts: Mapping[str, int], host: str):
    """One Job holding every task, the ps tasks first: (job, task, {job: hosts})."""
    total = counts['ps'] + counts['worker']
    if index >= total:
        raise UsageError(
            f'{INDEX}={index} is out of range: --num_ps_tasks={counts["ps"]} and '
            f'--worker_replicas={counts["worker"]} make {total} pod(s), indexes '
            f'0..{total - 1}; set the Job\'s completions and parallelism to {total}, or '
            'the flags to the Job\'s size.')
    suffix = f'-{index}'
    if not host.endswith(suffix) or host == suffix:
        raise UsageError(
            f'This pod\'s host name is {host!r}, not <job>{suffix}, the name an Indexed '
            f'Job gives pod {index}; leave the pod template\'s hostname unset.')
    pods = [f'{host[:-len(suffix)]}-{i}' for i in range(total)]
    job, task = ('ps', index) if index < counts['ps'] else ('worker', index - counts['ps'])
    return job, task, {'ps': pods[:counts['ps']], 'worker': pods[counts['ps']:]}


def _in_jobset(environ: Mapping[str, str], index: int, counts: Mapping[str, int],
               host: str):
    """A JobSet whose replicated Jobs ps and worker are the two jobs: (job, task,
    {job: hosts})."""
    jobset, job = environ.get(JOBSET_NAME), environ.get(REPLICATED_JOB_NAME)
    if not (jobset and job):
        raise UsageError(
            f'Set both {JOBSET_NAME} and {REPLICATED_JOB_NAME} (from the pod\'s labels '
            'jobset.sigs.k8s.io/jobset-name and jobset.sigs.k8s.io/replicatedjob-name), '
            'or neither for one Indexed Job holding every task.')
    if job not in JOBSET_JOBS:
        raise UsageError(f'{REPLICATED_JOB_NAME}={job!r}: name the JobSet\'s replicated '
                         'Jobs ps and worker, or pass neither JobSet variable for one '
                         'replicated Job holding every task.')
    if environ.get(JOB_INDEX, '0').strip() != '0':
        raise UsageError(f'{JOB_INDEX}={environ[JOB_INDEX]}: give the replicated Jobs ps '
                         'and worker replicas: 1, and set their completions to the task '
                         'counts.')
    if index >= counts[job]:
        raise UsageError(
            f'{INDEX}={index} of replicated Job {job!r} is out of range: '
            f'{COUNT_FLAGS[job]}={counts[job]}; set its completions to {counts[job]}, or '
            f'{COUNT_FLAGS[job]} to its completions.')
    hosts = {name: [f'{jobset}-{name}-0-{i}' for i in range(count)]
             for name, count in counts.items()}
    if host != hosts[job][index]:
        raise UsageError(
            f'This pod\'s host name is {host!r}, not {hosts[job][index]!r}, JobSet\'s name '
            f'for pod {index} of replicated Job {job!r}: set {JOBSET_NAME} and '
            f'{REPLICATED_JOB_NAME} from the pod\'s labels and keep the JobSet\'s '
            'spec.network.enableDNSHostnames true.')
    return job, index, hosts


def _addresses(hosts, service: str, port: int) -> Tuple[str, ...]:
    return tuple(f'{host}.{service}:{port}' for host in hosts)
