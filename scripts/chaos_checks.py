"""What scripts/chaos_cluster.py checks and prints once its cluster is done: the error
lines of a log, the final checkpoint's sync-replicas counters and model variables
(TensorFlow imported here only, quietly, as the scripts import it), its evaluation,
the summary."""
import importlib
import os
import re
import signal
import subprocess
import sys

from chaos_tasks import ROOT, Task

EVAL = ROOT / 'eval_image_classifier.py'


def error_lines(log: str):
    """Lines speaking of an error: ours ('ERROR: ...'), absl's or TensorFlow's, the C++
    runtime's and gRPC's ('E1124 ...', 'F1124 ...'), tracebacks."""
    return [line for line in log.splitlines()
            if 'ERROR' in line or 'Traceback' in line or re.match(r'[EF]\d{4} ', line)]


def _checkpoint_reader(train_dir):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    importlib.import_module('cli.startup')  # TensorFlow loads quietly, as in the scripts
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    for signum, handler in handlers.items():  # startup sets its own
        signal.signal(signum, handler)
    # The C++ runtime's notices at its first op (oneDNN's, absl's) are not ours to print.
    with open(os.devnull, 'w') as devnull:
        saved = os.dup(2)
        os.dup2(devnull.fileno(), 2)
        try:
            return tf.train.load_checkpoint(tf.train.latest_checkpoint(str(train_dir)))
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def sync_counters(train_dir, aggregate: int) -> dict:
    """The final checkpoint's update counters (deployment.sync_replicas.counters), and
    whether gradients_applied == N * updates_applied == N * global_step."""
    reader = _checkpoint_reader(train_dir)
    value = lambda key: int(reader.get_tensor(f'{key}/.ATTRIBUTES/VARIABLE_VALUE'))  # noqa: E731
    counters = {'global_step': value('global_step'),
                'updates_applied': value('sync_replicas/updates_applied'),
                'gradients_applied': value('sync_replicas/gradients_applied')}
    counters['exact'] = (counters['gradients_applied'] == aggregate * counters['updates_applied']
                         and counters['updates_applied'] == counters['global_step'])
    return counters


def model_variables(train_dir) -> dict:
    reader = _checkpoint_reader(train_dir)
    return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
            if key.startswith('model/')}


def evaluate(args, train_dir, log_dir) -> int:
    """eval_image_classifier.py once on the final checkpoint; its exit status."""
    task = Task('eval', [EVAL, '--dataset_name=shapes', f'--dataset_dir={args.dataset_dir}',
                         '--dataset_split_name=validation', f'--model_name={args.model_name}',
                         f'--checkpoint_path={train_dir}', f'--eval_dir={log_dir / "eval"}'],
                log_dir)
    task.start()
    try:
        return task.process.wait(timeout=300)
    except subprocess.TimeoutExpired:
        task.signal()
        return -1


def print_summary(summary):
    print(f'Chaos {summary["mode"]}: {summary["num_ps"]} ps + {summary["num_workers"]} '
          f'workers, seed {summary["seed"]}, {summary["max_number_of_steps"]} steps.')
    for fault in summary.get('faults', []):
        if 'at_step' in fault:
            where = (f' (inside its offer at version {fault["inside_offer_of_version"]})'
                     if 'inside_offer_of_version' in fault else '')
            print(f'  {fault["kind"]} task {fault["task"]} killed at step {fault["at_step"]}'
                  f'{where}, restarted after {fault["delay"]} s: '
                  f'{fault.get("steps_redone", "?")} step(s) redone')
    redone = sum(f.get('steps_redone', 0) for f in summary.get('faults', []))
    print(f'Faults injected: {sum("at_step" in f for f in summary.get("faults", []))}; '
          f'steps redone: {redone}; wall time: {summary.get("wall_secs", "?")} s; peak '
          f'memory: {summary.get("peak_rss_mb", "?")} MB summed RSS of every task '
          f'({summary.get("peak_pss_mb", "?")} MB PSS).')
    for key in ('sync_counters', 'eval_status', 'identical_to_uninterrupted'):
        if key in summary:
            print(f'{key}: {summary[key]}')
    for problem in summary['problems']:
        print(f'FAILED: {problem}')
    print(f'Exit status: {summary["status"]}.')
