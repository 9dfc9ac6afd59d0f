r"""Chaos at scale on one machine: a cluster of train_image_classifier.py tasks on
127.0.0.1 under a seeded fault schedule, checked and measured.

  .venv/bin/python scripts/chaos_cluster.py --mode=sync_replicas \
      --dataset_dir=/tmp/shapes --log_dir=/tmp/chaos --max_number_of_steps=100 --seed=1

Modes (the cluster's size by default):
  sync_replicas  2 ps + 10 workers, --sync_replicas --replicas_to_aggregate=8 (2 backups)
  async_ps       2 ps + 8 workers
  all_reduce     4 workers (multi-worker all-reduce)

The schedule, drawn from --seed and keyed on the chief's logged progress (its
`global step N:` lines, so a rerun injects the same faults at the same steps): kill -9
of --worker_kills distinct non-chief workers, each restarted after a drawn delay; in
the ps modes a ps task killed once (--ps_kills), after which the chief stops with its
one ERROR line and the tool does the documented recovery: restart that ps task, then
the chief, which resumes from its last checkpoint. Under all-reduce every survivor
stops with its one line and the whole cluster is restarted. With
--fault_in_critical_section (sync_replicas) one of the worker kills lands inside the
critical section: the chief runs through tests/helpers/run_chief_with_critical_section_fault.py,
whose test-only fault point blocks that worker inside its offer once the tool arms it.

Checked: training reaches --max_number_of_steps; every fault leaves exactly its one
ERROR line on the surviving tasks (never TensorFlow's or gRPC's text, no traceback);
sync_replicas: the final checkpoint's counters hold gradients_applied == N *
updates_applied == N * global_step; --evaluate: eval_image_classifier.py on the final
checkpoint exits 0; --compare_uninterrupted: a second, fault-free cluster under the
same --seed (and --deterministic) ends with identical model variables.

Printed (and written to LOG_DIR/summary.json): the faults with the steps each made the
cluster redo (the step reached before the fault minus the step resumed at; 0 where
nothing was restored), wall time, peak memory (the sum of every task's RSS, sampled
from /proc each second; PSS too) and the exit status (0 when every check passed).
The tool's parts: scripts/chaos_tasks.py (the processes, the memory sampler) and
scripts/chaos_checks.py (the checks on the results, the summary).
"""
import argparse
import json
import pathlib
import random
import re
import shlex
import signal
import sys
import time

from chaos_checks import (error_lines, evaluate, model_variables, print_summary,
                          sync_counters)
from chaos_tasks import ROOT, MemorySampler, Task, free_ports

TRAIN = ROOT / 'train_image_classifier.py'
FAULTY_CHIEF = ROOT / 'tests' / 'helpers' / 'run_chief_with_critical_section_fault.py'
MODES = {'sync_replicas': (2, 10), 'async_ps': (2, 8), 'all_reduce': (0, 4)}
STEP = re.compile(r'global step (\d+):')
RESUMED = re.compile(r'Resumed from \S+ at step (\d+)\.')
PS_STOPPED = r'ERROR: ps task {task} \(127\.0\.0\.1:\d+\) stopped answering, so training stopped; '
WORKER_STOPPED = (r'ERROR: worker task \d+ \(127\.0\.0\.1:\d+\) stopped answering, so '
                  r'training stopped; restart every worker')


class ChaosFailed(Exception):
    """A check or a bounded wait failed: the summary's status is 1."""


def fault_schedule(args, num_ps, num_workers):
    """[{kind, task, step, delay, ...}] drawn from --seed, in the order they fire."""
    rng = random.Random(args.seed)
    steps = args.max_number_of_steps
    low, high = max(2, int(0.15 * steps)), max(3, int(0.7 * steps))
    faults = [{'kind': 'worker', 'task': task, 'step': step,
               'delay': round(rng.uniform(1.0, 6.0), 1)}
              for task, step in zip(rng.sample(range(1, num_workers), args.worker_kills),
                                    sorted(rng.sample(range(low, high), args.worker_kills)))]
    if args.fault_in_critical_section and faults:
        faults[rng.randrange(len(faults))]['kind'] = 'worker_in_critical_section'
    for _ in range(args.ps_kills if num_ps else 0):
        faults.append({'kind': 'ps', 'task': rng.randrange(num_ps),
                       'step': rng.randrange(max(2, int(0.3 * steps)), int(0.6 * steps) + 3),
                       'delay': round(rng.uniform(1.0, 6.0), 1)})
    return sorted(faults, key=lambda fault: fault['step'])


class Chaos:
    """Starts the cluster, injects the schedule, recovers as documented, checks."""

    def __init__(self, args, train_dir: pathlib.Path, log_dir: pathlib.Path, faults):
        self.args, self.train_dir, self.log_dir, self.faults = args, train_dir, log_dir, faults
        log_dir.mkdir(parents=True, exist_ok=True)
        num_ps, num_workers = args.num_ps, args.num_workers
        ports = free_ports(num_ps + num_workers)
        hosts = [f'--worker_hosts={",".join(f"127.0.0.1:{p}" for p in ports[num_ps:])}']
        if num_ps:
            hosts.append(f'--ps_hosts={",".join(f"127.0.0.1:{p}" for p in ports[:num_ps])}')
            # Servers outlive a chief's restart; the tool ends them once it finished.
            hosts.append('--wait_for_chief_secs=600')
        training = self._training_flags()
        self.ps = [Task(f'ps{i}', [TRAIN, *hosts, '--job_name=ps', f'--task={i}'], log_dir)
                   for i in range(num_ps)]
        # PS modes: workers 1.. only serve; all-reduce: every worker trains.
        worker_flags = training if not num_ps else []
        self.workers = [Task(f'worker{i}', [TRAIN, *hosts, '--job_name=worker', f'--task={i}',
                                            *worker_flags], log_dir)
                        for i in range(1, num_workers)]
        chief = [TRAIN, *hosts, '--job_name=worker', '--task=0', *training]
        critical = [f for f in faults if f['kind'] == 'worker_in_critical_section']
        if critical:
            self.arm = log_dir / 'critical_section.arm'
            self.marker = log_dir / 'critical_section.marker'
            for stale in (self.arm, self.marker):
                stale.unlink(missing_ok=True)
            chief = [FAULTY_CHIEF, f'--fault_worker={critical[0]["task"]}',
                     f'--fault_arm={self.arm}', f'--fault_marker={self.marker}', *chief[1:]]
        self.chief = Task('chief', chief, log_dir)
        self.tasks = [*self.ps, *self.workers, self.chief]
        self.restarts = []  # (time, task)
        self.memory = MemorySampler(self.tasks)

    def _training_flags(self):
        args = self.args
        flags = ['--dataset_name=shapes', f'--dataset_dir={args.dataset_dir}',
                 f'--model_name={args.model_name}', f'--batch_size={args.batch_size}',
                 f'--train_dir={self.train_dir}',
                 f'--max_number_of_steps={args.max_number_of_steps}',
                 '--log_every_n_steps=1', f'--save_interval_secs={args.save_interval_secs}',
                 f'--seed={args.seed}']
        if args.compare_uninterrupted:  # the same seed, and the same order of reading
            flags.append('--deterministic')
        if args.mode == 'sync_replicas':
            flags += ['--sync_replicas', f'--replicas_to_aggregate={args.replicas_to_aggregate}']
        return flags + shlex.split(args.train_flags)

    # --- Waiting, bounded, while restarts due are made. ---

    def _service(self):
        now = time.monotonic()
        for due, task in [r for r in self.restarts if r[0] <= now]:
            self.restarts.remove((due, task))
            task.start()
        for task in self.tasks:  # a task failing on its own (not a fault's stop) ends it
            run = task.runs[-1] if task.runs else None
            if (run and not run['killed'] and not run['expected'] and task is not self.chief
                    and run['process'].poll() not in (None, 0)):
                raise ChaosFailed(f'{task.name} exited {run["process"].returncode} on its '
                                  f'own; see {run["log"]}')
        if time.monotonic() > self.deadline:
            raise ChaosFailed(f'the run took longer than --timeout_secs={self.args.timeout_secs}')

    def _wait(self, condition, timeout, what):
        end = time.monotonic() + timeout
        while not condition():
            self._service()
            if time.monotonic() > end:
                raise ChaosFailed(f'{what}: not within {timeout} s')
            time.sleep(0.2)

    def _chief_step(self) -> int:
        steps = STEP.findall(self.chief.log())
        return int(steps[-1]) if steps else -1

    def _resumed_step(self) -> int:
        """The step the restarted chief resumed at: 0 if it found no checkpoint (it
        logs no 'Resumed from' line before its first step)."""
        self._wait(lambda: RESUMED.search(self.chief.log()) or STEP.search(self.chief.log())
                   or not self.chief.alive(), 300, 'the restarted chief resuming')
        match = RESUMED.search(self.chief.log())
        if match:
            return int(match.group(1))
        if STEP.search(self.chief.log()):
            return 0
        raise ChaosFailed(f'the restarted chief exited before its first step; see '
                          f'{self.chief.runs[-1]["log"]}')

    # --- The faults. ---

    def _kill_worker(self, fault):
        task = self.workers[fault['task'] - 1]
        if fault['kind'] == 'worker_in_critical_section':
            self.arm.write_text('armed')
            self._wait(self.marker.exists, 180, f'worker {fault["task"]} at the fault point')
            fault['inside_offer_of_version'] = int(self.marker.read_text())
        task.signal()
        fault['steps_redone'] = 0  # nothing restored: the others train on
        if self.args.mode == 'all_reduce':
            return self._restart_all_reduce(fault, killed=task)
        self.restarts.append((time.monotonic() + fault['delay'], task))

    def _kill_ps(self, fault):
        reached = self._chief_step()
        self.ps[fault['task']].signal()
        self.chief.runs[-1]['expected'] = [PS_STOPPED.format(task=fault['task'])]
        self._wait(lambda: not self.chief.alive(), 180, 'the chief stopping after the ps died')
        if self.chief.process.returncode != 1:
            raise ChaosFailed(f'the chief exited {self.chief.process.returncode} after ps '
                              f'{fault["task"]} died, not 1')
        time.sleep(fault['delay'])
        self.ps[fault['task']].start()  # restart that task, then the chief
        self.chief.start()
        fault['steps_redone'] = reached - self._resumed_step()

    def _restart_all_reduce(self, fault, killed):
        reached = self._chief_step()
        # Every other worker, alive or not: one may have stopped with its line already.
        survivors = [t for t in [self.chief, *self.workers] if t is not killed]
        for task in survivors:
            task.runs[-1]['expected'] = [WORKER_STOPPED]
        self._wait(lambda: not any(t.alive() for t in survivors), 180,
                   'every surviving worker stopping')
        codes = {t.name: t.process.returncode for t in survivors}
        if set(codes.values()) != {1}:
            raise ChaosFailed(f'the surviving workers exited {codes}, not 1 each')
        time.sleep(fault['delay'])
        for task in [*self.workers, self.chief]:
            task.start()
        fault['steps_redone'] = reached - self._resumed_step()

    # --- The run. ---

    def run(self) -> dict:
        started = time.monotonic()
        self.deadline = started + self.args.timeout_secs
        self.memory.start()
        for task in self.tasks:  # servers first, the chief last
            task.start()
        pending = list(self.faults)
        try:
            while self.chief.alive() or self.restarts:
                self._service()
                step = self._chief_step()
                while pending and pending[0]['step'] <= step and self.chief.alive():
                    fault = pending.pop(0)
                    fault['at_step'] = step
                    (self._kill_ps if fault['kind'] == 'ps' else self._kill_worker)(fault)
                    step = self._chief_step()
                time.sleep(0.2)
            if self.chief.process.returncode != 0:
                raise ChaosFailed(f'the chief exited {self.chief.process.returncode}; see '
                                  f'{self.chief.runs[-1]["log"]}')
            self._finish_servers()
        finally:
            self.measured = {'wall_secs': round(time.monotonic() - started, 1),
                             'faults': self.faults, 'not_injected': pending,
                             'peak_rss_mb': round(self.memory.peak['Rss'] / 2**20),
                             'peak_pss_mb': round(self.memory.peak['Pss'] / 2**20),
                             'final_step': self._chief_step()}
            self.memory.stopped.set()
            for task in self.tasks:
                task.signal()
        return self.measured

    def _finish_servers(self):
        """PS modes: the chief is done; SIGTERM ends each server at once (exit 0). The
        all-reduce workers end with the chief."""
        others = [t for t in [*self.ps, *self.workers] if t.alive()]
        if self.args.num_ps:
            # A worker restarted late may still be starting: a signal then would end it
            # before it serves (exit 143), so wait until each one serves.
            self._wait(lambda: all('Serving ' in t.log() for t in others), 120,
                       'every restarted task serving')
            for task in others:
                task.signal(signal.SIGTERM)
        self._wait(lambda: not any(t.alive() for t in others), 120, 'the other tasks exiting')
        codes = {t.name: t.process.returncode for t in others}
        if any(codes.values()):
            raise ChaosFailed(f'tasks exited non-zero at the end: {codes}')

    def check_error_lines(self):
        """Each fault's one line on each surviving task; nothing else anywhere."""
        problems = []
        for task in self.tasks:
            for run in task.runs:
                if run['killed']:
                    continue
                lines = error_lines(run['log'].read_text(errors='replace'))
                expected = run['expected']
                if len(lines) != len(expected) or not all(
                        re.match(p, line) for p, line in zip(expected, lines)):
                    problems.append(f'{run["log"].name}: {lines[:4]}')
        return problems


def run_chaos(args) -> dict:
    log_dir = pathlib.Path(args.log_dir).resolve()
    train_dir = args.train_dir.resolve()
    faults = fault_schedule(args, args.num_ps, args.num_workers)
    summary = {'mode': args.mode, 'seed': args.seed, 'num_ps': args.num_ps,
               'num_workers': args.num_workers, 'max_number_of_steps': args.max_number_of_steps,
               'problems': []}
    chaos = Chaos(args, train_dir, log_dir, faults)
    try:
        summary.update(chaos.run())
    except ChaosFailed as failure:
        summary['problems'].append(str(failure))
        summary.update(getattr(chaos, 'measured', {}))
    summary['problems'] += [f'more than one line, or another line: {p}'
                            for p in chaos.check_error_lines()]
    if summary['problems']:
        return summary
    if summary['final_step'] != args.max_number_of_steps:
        summary['problems'].append(f'the chief stopped at step {summary["final_step"]}')
    if args.mode == 'sync_replicas':
        summary['sync_counters'] = sync_counters(train_dir, args.replicas_to_aggregate)
        if not summary['sync_counters']['exact']:
            summary['problems'].append(f'sync counters: {summary["sync_counters"]}')
    if args.evaluate:
        summary['eval_status'] = evaluate(args, train_dir, log_dir)
        if summary['eval_status']:
            summary['problems'].append(f'evaluation exited {summary["eval_status"]}')
    if args.compare_uninterrupted:
        compare_uninterrupted(args, train_dir, log_dir, summary)
    return summary


def compare_uninterrupted(args, train_dir, log_dir, summary):
    """The same cluster and seed without faults: its final model variables must equal
    the chaos run's."""
    reference = Chaos(args, train_dir.parent / (train_dir.name + '_uninterrupted'),
                      log_dir / 'uninterrupted', faults=[])
    try:
        summary['uninterrupted'] = reference.run()
    except ChaosFailed as failure:
        summary['problems'].append(f'uninterrupted run: {failure}')
        return
    import numpy as np  # pylint: disable=import-outside-toplevel
    ours, theirs = model_variables(train_dir), model_variables(reference.train_dir)
    differ = sorted(key for key in ours if key not in theirs
                    or not np.array_equal(ours[key], theirs[key]))
    summary['identical_to_uninterrupted'] = not differ and ours.keys() == theirs.keys()
    if not summary['identical_to_uninterrupted']:
        summary['problems'].append(f'{len(differ)} model variable(s) differ from the '
                                   f'uninterrupted run\'s, e.g. {differ[:3]}')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--mode', choices=sorted(MODES), required=True)
    parser.add_argument('--dataset_dir', required=True, help='A shapes dataset directory.')
    parser.add_argument('--log_dir', required=True, help='Every task\'s log, summary.json.')
    parser.add_argument('--train_dir', help='Default: LOG_DIR/train (must be new).')
    parser.add_argument('--num_ps', type=int, help='Default: the mode\'s.')
    parser.add_argument('--num_workers', type=int, help='Default: the mode\'s.')
    parser.add_argument('--replicas_to_aggregate', type=int, default=8)
    parser.add_argument('--worker_kills', type=int, help='Default: 4, 1 under all_reduce.')
    parser.add_argument('--ps_kills', type=int, default=1, choices=(0, 1))
    parser.add_argument('--fault_in_critical_section', action='store_true')
    parser.add_argument('--max_number_of_steps', type=int, default=100)
    parser.add_argument('--model_name', default='lenet')
    parser.add_argument('--batch_size', type=int, default=4)
    parser.add_argument('--save_interval_secs', type=int, default=5)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--train_flags', default='', help='More training flags, one string.')
    parser.add_argument('--evaluate', action='store_true')
    parser.add_argument('--compare_uninterrupted', action='store_true')
    parser.add_argument('--timeout_secs', type=float, default=1200)
    args = parser.parse_args(argv)
    default_ps, default_workers = MODES[args.mode]
    args.num_ps = default_ps if args.num_ps is None else args.num_ps
    args.num_workers = args.num_workers or default_workers
    if args.worker_kills is None:
        args.worker_kills = 1 if args.mode == 'all_reduce' else 4
    if (args.mode == 'all_reduce') != (args.num_ps == 0):
        parser.error('all_reduce runs without ps tasks, the other modes with some.')
    if not 0 <= args.worker_kills < args.num_workers:
        parser.error(f'--worker_kills={args.worker_kills}: there are {args.num_workers - 1} '
                     'non-chief workers to kill.')
    if args.max_number_of_steps < 20:
        parser.error('--max_number_of_steps must be at least 20: the faults land between '
                     '15 % and 70 % of the run.')
    if args.fault_in_critical_section and args.mode != 'sync_replicas':
        parser.error('--fault_in_critical_section is for --mode=sync_replicas.')
    log_dir = pathlib.Path(args.log_dir)
    args.train_dir = pathlib.Path(args.train_dir or log_dir / 'train')
    for directory in (args.train_dir, args.train_dir.parent / (args.train_dir.name +
                                                               '_uninterrupted')):
        if directory.exists() and any(directory.iterdir()):
            parser.error(f'{directory} is not empty; the steps redone are counted from a '
                         'fresh start: pass a new --log_dir or --train_dir.')
    return args


def _interrupted(signum, frame):
    del frame
    raise ChaosFailed(f'stopped by signal {signum}')


def main(argv=None):
    args = parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGINT):  # every task is killed on the way out
        signal.signal(signum, _interrupted)
    summary = run_chaos(args)
    summary['status'] = 1 if summary['problems'] else 0
    pathlib.Path(args.log_dir, 'summary.json').write_text(json.dumps(summary, indent=1))
    print_summary(summary)
    return summary['status']


if __name__ == '__main__':
    sys.exit(main())
