"""The cluster of a Kubernetes Indexed Job or JobSet pod (deployment.kubernetes): the same
Cluster and plan as the equivalent TF_CONFIG for every pod, mistakes one line; and the
manifests of docs/distributed.md, read and resolved for every pod they would start."""
import dataclasses
import json
import os
import re

import pytest
from absl import flags

from cli import configs
from cli import flags as cli_flags
from core.errors import UsageError
from deployment import cluster, kubernetes, model_deploy
from helpers import yaml_subset
from helpers.docs_blocks import ROOT

SERVICE, PORT = 'trainer', 2222


def _pod(index, host, **jobset):
    return {'JOB_COMPLETION_INDEX': str(index), 'HOSTNAME': host, **jobset}


def _tf_config(ps, workers, task_type, index, chief=False):
    jobs = {'ps': list(ps), 'worker': list(workers)}
    if chief:  # TF's own launchers list the chief apart; it is worker 0 here
        jobs['chief'], jobs['worker'] = jobs['worker'][:1], jobs['worker'][1:]
        task_type, index = ('chief', 0) if (task_type, index) == ('worker', 0) else (
            task_type, index - (task_type == 'worker'))
    return {'TF_CONFIG': json.dumps({'cluster': {k: v for k, v in jobs.items() if v},
                                     'task': {'type': task_type, 'index': index}})}


def _same_plan(from_kubernetes, from_tf_config):
    """The clusters agree but for their source, and so do the deployments built on them."""
    assert from_kubernetes.source == 'Kubernetes'
    assert from_kubernetes == dataclasses.replace(from_tf_config, source='Kubernetes')
    plan, expected = (model_deploy.from_flags(cluster=c)
                      for c in (from_kubernetes, from_tf_config))
    assert plan == dataclasses.replace(expected, cluster=from_kubernetes)
    return plan


def _addresses(hosts):
    return tuple(f'{host}.{SERVICE}:{PORT}' for host in hosts)


@pytest.mark.parametrize('chief', [False, True], ids=['worker0', 'chief_job'])
def test_indexed_job_pods_resolve_as_tf_config_async_ps(chief):
    # One Job of 2 ps + 3 workers: indexes 0, 1 are the ps tasks, 2..4 the workers.
    ps, workers = _addresses(['train-0', 'train-1']), _addresses(
        ['train-2', 'train-3', 'train-4'])
    roles = [('ps', 0), ('ps', 1), ('worker', 0), ('worker', 1), ('worker', 2)]
    for index, (task_type, task_index) in enumerate(roles):
        resolved = cluster.resolve(kubernetes_service=SERVICE, num_ps_tasks=2,
                                   worker_replicas=3, environ=_pod(index, f'train-{index}'))
        expected = cluster.resolve(environ=_tf_config(ps, workers, task_type, task_index,
                                                      chief))
        plan = _same_plan(resolved, expected)
        assert plan.mode == model_deploy.PARAMETER_SERVER
        assert plan.is_chief == (index == 2) and resolved.address == (ps + workers)[index]


def test_indexed_job_pods_resolve_as_tf_config_all_reduce():
    workers = _addresses(['allreduce-0', 'allreduce-1'])
    for index in range(2):
        resolved = cluster.resolve(kubernetes_service=SERVICE, worker_replicas=2,
                                   environ=_pod(index, f'allreduce-{index}'))
        plan = _same_plan(resolved, cluster.resolve(
            environ=_tf_config((), workers, 'worker', index)))
        assert (plan.mode, plan.replica_id, resolved.ps) == (
            model_deploy.MULTI_WORKER, index, ())


def test_jobset_ps_and_worker_replicated_jobs_resolve_as_tf_config():
    ps = _addresses(['run-ps-0-0'])
    workers = _addresses(['run-worker-0-0', 'run-worker-0-1'])
    for job, index in [('ps', 0), ('worker', 0), ('worker', 1)]:
        environ = _pod(index, f'run-{job}-0-{index}', JOBSET_NAME='run',
                       REPLICATED_JOB_NAME=job, JOB_INDEX='0')
        resolved = cluster.resolve(kubernetes_service=SERVICE, num_ps_tasks=1,
                                   worker_replicas=2, environ=environ)
        _same_plan(resolved, cluster.resolve(environ=_tf_config(ps, workers, job, index)))


def test_one_replicated_job_of_a_jobset_is_an_indexed_job():
    # No JobSet variables: its hosts <jobset>-<replicatedJob>-0-<i> are <job>-<i>.
    resolved = cluster.resolve(kubernetes_service='run', kubernetes_port=3000,
                               num_ps_tasks=1, worker_replicas=1,
                               environ=_pod(1, 'run-tasks-0-1'))
    assert (resolved.ps, resolved.workers) == (('run-tasks-0-0.run:3000',),
                                               ('run-tasks-0-1.run:3000',))
    assert resolved.is_chief


def test_the_host_name_comes_from_the_system_without_hostname(monkeypatch):
    monkeypatch.setattr('socket.gethostname', lambda: 'train-1')
    resolved = cluster.resolve(kubernetes_service=SERVICE, worker_replicas=2,
                               environ={'JOB_COMPLETION_INDEX': '1'})
    assert resolved.address == f'train-1.{SERVICE}:{PORT}'


JOBSET_WORKER = dict(JOBSET_NAME='run', REPLICATED_JOB_NAME='worker')


@pytest.mark.parametrize('kwargs, environ, message', [
    (dict(worker_replicas=2), _pod(2, 'train-2'),
     r'JOB_COMPLETION_INDEX=2 is out of range: --num_ps_tasks=0 and --worker_replicas=2 '
     r'make 2 pod\(s\), indexes 0..1; set the Job\'s completions'),
    (dict(worker_replicas=2), _pod(2, 'run-worker-0-2', **JOBSET_WORKER),
     r'of replicated Job \'worker\' is out of range: --worker_replicas=2; set its '
     r'completions to 2'),
    (dict(worker_replicas=2), {'HOSTNAME': 'train-0'},
     'needs JOB_COMPLETION_INDEX, .* make the Job Indexed'),
    (dict(worker_replicas=2), _pod('x', 'train-0'), 'not a whole number'),
    (dict(), _pod(0, 'train-0'), 'needs --worker_replicas=M'),
    (dict(worker_replicas=2), _pod(1, 'train-7'),
     'not <job>-1, the name an Indexed Job gives pod 1; leave the pod template\'s hostname'),
    (dict(worker_replicas=2), _pod(1, 'run-worker-0-1', JOBSET_NAME='run'),
     'Set both JOBSET_NAME and REPLICATED_JOB_NAME'),
    (dict(worker_replicas=2), _pod(1, 'run-chief-0-1', JOBSET_NAME='run',
                                   REPLICATED_JOB_NAME='chief'),
     'name the JobSet\'s replicated Jobs ps and worker'),
    (dict(worker_replicas=2), _pod(1, 'run-worker-1-1', JOB_INDEX='1', **JOBSET_WORKER),
     'JOB_INDEX=1: give the replicated Jobs ps and worker replicas: 1'),
    (dict(worker_replicas=2), _pod(1, 'run-worker-0-1-x7q2z', **JOBSET_WORKER),
     'not \'run-worker-0-1\', JobSet\'s name .*enableDNSHostnames'),
    (dict(worker_replicas=2), {**_pod(0, 'train-0'), 'TF_CONFIG': '{}'},
     'TF_CONFIG and --kubernetes_service=trainer both describe the cluster; unset'),
    (dict(worker_replicas=2, ps_hosts='a:1', worker_hosts='b:1'), _pod(0, 'train-0'),
     'takes the cluster and this task from the pod; drop --ps_hosts, --worker_hosts'),
    (dict(worker_replicas=2, job_name='worker', task=1), _pod(0, 'train-0'),
     'drop --job_name, --task'),
])
def test_mistakes_are_one_line_naming_the_fix(kwargs, environ, message):
    with pytest.raises(UsageError, match=message) as error:
        cluster.resolve(kubernetes_service=SERVICE, environ=environ, **kwargs)
    assert '\n' not in str(error.value)


def test_without_the_flag_the_pod_environment_is_not_read():
    # An Indexed Job of independent runs (a sweep) trains each pod on its own.
    assert cluster.resolve(environ=_pod(3, 'sweep-3')) is None


# The manifests of docs/distributed.md, as Kubernetes would start their pods.
DOCS = ROOT / 'docs' / 'distributed.md'
SCRIPT = 'train_image_classifier.py'


def _manifests():
    """Every ```yaml block of the page that is a whole manifest (has an apiVersion)."""
    blocks = re.findall(r'^```yaml\n(.*?)^```', DOCS.read_text(), re.M | re.S)
    return [yaml_subset.load_all(b) for b in blocks if re.search(r'^apiVersion:', b, re.M)]


def _pods(documents):
    """(host, subdomain, labels and annotations, pod spec, index) of every pod."""
    for document in documents:
        if document['kind'] == 'Job':
            name, spec = document['metadata']['name'], document['spec']
            assert spec['completionMode'] == 'Indexed'
            assert spec['parallelism'] == spec['completions']  # every task at once
            pod = spec['template']
            labels = {'job-name': name, **pod.get('metadata', {}).get('labels', {})}
            for index in range(spec['completions']):
                yield f'{name}-{index}', pod['spec']['subdomain'], labels, pod['spec'], index
        elif document['kind'] == 'JobSet':
            name = document['metadata']['name']
            network = document['spec']['network']
            assert network['enableDNSHostnames'] is True
            for replicated in document['spec']['replicatedJobs']:
                assert replicated.get('replicas', 1) == 1
                spec = replicated['template']['spec']
                labels = {'jobset.sigs.k8s.io/jobset-name': name,
                          'jobset.sigs.k8s.io/replicatedjob-name': replicated['name'],
                          'jobset.sigs.k8s.io/job-index': '0'}
                for index in range(spec['completions']):
                    yield (f'{name}-{replicated["name"]}-0-{index}',
                           network.get('subdomain', name), labels, spec['template']['spec'],
                           index)


def _headless_services(documents, pods):
    """The Services the pods' subdomains name: headless, selecting the pods. A JobSet
    makes its own."""
    services = {d['metadata']['name']: d['spec'] for d in documents if d['kind'] == 'Service'}
    for document in documents:
        if document['kind'] == 'JobSet':
            name = document['metadata']['name']
            services[document['spec']['network'].get('subdomain', name)] = {
                'clusterIP': 'None',
                'selector': {'jobset.sigs.k8s.io/jobset-name': name}}
    for _, subdomain, labels, _, _ in pods:
        service = services[subdomain]
        assert service['clusterIP'] == 'None'
        assert service['selector'].items() <= labels.items()
    return services


def _pod_environ(host, labels, container, index):
    environ = {'HOSTNAME': host, 'JOB_COMPLETION_INDEX': str(index)}
    for variable in container.get('env', []):
        if 'value' in variable:
            environ[variable['name']] = variable['value']
        else:  # the downward API: a label or annotation of the pod
            path = variable['valueFrom']['fieldRef']['fieldPath']
            key = re.fullmatch(r"metadata\.(?:labels|annotations)\['(.*)'\]", path)[1]
            environ[variable['name']] = labels[key]
    return environ


def _script_flags(argv):
    values = flags.FlagValues()
    cli_flags.define(cli_flags.declared_groups(ROOT / SCRIPT), usage='', flag_values=values)
    values([SCRIPT, *argv[argv.index(SCRIPT) + 1:]])
    return values


def _deployment(argv, environ, monkeypatch):
    with monkeypatch.context() as patch:
        for name in [n for n in os.environ if n.startswith(('SLURM_', 'JOB')) or n in (
                'TF_CONFIG', 'HOSTNAME', 'REPLICATED_JOB_NAME')]:
            patch.delenv(name)
        for name, value in environ.items():
            patch.setenv(name, value)
        return configs.deployment_config_from_flags(_script_flags(argv))


def test_the_docs_manifests_start_one_cluster_with_the_tf_config_plan(monkeypatch):
    manifests = _manifests()
    modes = []
    for documents in manifests:
        pods = list(_pods(documents))
        _headless_services(documents, pods)
        deployments = []
        for host, subdomain, labels, spec, index in pods:
            container, = spec['containers']
            argv = container['command'] + container.get('args', [])
            environ = _pod_environ(host, labels, container, index)
            deployment = _deployment(argv, environ, monkeypatch)
            resolved = deployment.cluster
            port = resolved.address.rpartition(':')[2]
            assert resolved.address == f'{host}.{subdomain}:{port}'
            assert int(port) in [p['containerPort'] for p in container['ports']]
            # The same flags with TF_CONFIG instead of the pod's environment.
            tf_config = _tf_config(resolved.ps, resolved.workers, resolved.task_type,
                                   resolved.task_index)
            without = [a for a in argv if not a.startswith('--kubernetes_')]
            expected = _deployment(without, tf_config, monkeypatch)
            assert deployment == dataclasses.replace(expected, cluster=resolved)
            assert resolved == dataclasses.replace(expected.cluster, source='Kubernetes')
            deployments.append(deployment)
        clusters = {(d.cluster.ps, d.cluster.workers) for d in deployments}
        assert len(clusters) == 1  # every pod sees the same cluster
        ps, workers = clusters.pop()
        assert sorted(d.cluster.address for d in deployments) == sorted(ps + workers)
        assert sum(d.is_chief for d in deployments) == 1
        modes.append(deployments[0].mode)
    assert sorted(set(modes)) == [model_deploy.MULTI_WORKER, model_deploy.PARAMETER_SERVER]
    assert len(modes) == len(manifests) >= 3  # Indexed Jobs of both modes, and a JobSet


def test_the_yaml_reader_refuses_what_it_would_misread():
    assert yaml_subset.load_all("a:\n- b: 1\n  c: 'x'  # note\n- d\n---\ne: 0\n") == [
        {'a': [{'b': 1, 'c': 'x'}, 'd']}, {'e': 0}]
    for text in ('a: [1, 2]\n', 'a: |\n  x\n', 'a: yes\n', 'a: 1.5\n', 'a: b: c\n',
                 'a: 1\na: 2\n'):
        with pytest.raises(yaml_subset.YamlError):
            yaml_subset.load_all(text)
