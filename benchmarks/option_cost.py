r"""What each training option costs in images/s: train_image_classifier.py with and
without it, on the same data, interleaved.

  .venv/bin/python benchmarks/option_cost.py --dataset_dir=/tmp/shapes \
      --model_name=cifarnet --batch_size=128 --rounds=5 \
      --options="--augmentation=randaugment;--mixup_alpha=0.2"

Each round runs the script once as typed (default flags plus --options' entry, the
baseline first) for --steps steps with a log line every --log_every steps, in a fresh
train_dir, and reads the examples/sec of its log lines, dropping the first --skip_lines
(tracing, warm-up); a run's speed is the median of the rest. The runs of one round
alternate, so the machine's noise hits every side alike; printed per option are its
median img/s and its ratio to the same round's baseline, median [min, max] over rounds.
What a run measures is everything the script does per step: input pipeline,
augmentation, step, summaries and saves at their default intervals.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

from absl import app, flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, 'train_image_classifier.py')
RATE = re.compile(r'global step \d+: .*?, ([\d.]+) examples/sec\)')

FLAGS = flags.FLAGS
flags.DEFINE_string('dataset_name', 'shapes', 'Dataset to train on.')
flags.DEFINE_string('dataset_dir', None, 'Its converted records.', required=True)
flags.DEFINE_string('model_name', 'cifarnet', 'Network to train.')
flags.DEFINE_integer('batch_size', 128, 'Batch size of every run.')
flags.DEFINE_integer('train_image_size', None, 'Image size of every run; unset: the '
                     'network\'s.')
flags.DEFINE_string('options', '--augmentation=randaugment', 'The options to measure, '
                    'separated by ";"; each entry is one run\'s extra flags, separated by '
                    'spaces.')
flags.DEFINE_string('common', '', 'Extra flags of every run, baseline included.')
flags.DEFINE_integer('rounds', 5, 'Interleaved rounds.')
flags.DEFINE_integer('steps', 60, 'Training steps per run.')
flags.DEFINE_integer('log_every', 10, 'Steps per log line (each gives one rate).')
flags.DEFINE_integer('skip_lines', 1, 'Log lines dropped at the start of each run.')


def run_once(extra, train_dir):
    """The median examples/sec of one run's log lines after the first --skip_lines."""
    command = [sys.executable, SCRIPT, f'--dataset_name={FLAGS.dataset_name}',
               f'--dataset_dir={FLAGS.dataset_dir}', f'--model_name={FLAGS.model_name}',
               f'--batch_size={FLAGS.batch_size}', f'--train_dir={train_dir}',
               f'--max_number_of_steps={FLAGS.steps}',
               f'--log_every_n_steps={FLAGS.log_every}', *FLAGS.common.split(), *extra]
    if FLAGS.train_image_size:
        command.append(f'--train_image_size={FLAGS.train_image_size}')
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, 'PYTHONPATH': ROOT})
    if result.returncode != 0:
        sys.exit(f'{" ".join(extra) or "baseline"} failed: '
                 f'{result.stderr.strip().splitlines()[-1]}')
    rates = [float(match[1]) for match in RATE.finditer(result.stderr)][FLAGS.skip_lines:]
    if not rates:
        sys.exit(f'{" ".join(extra) or "baseline"}: no log line after the first '
                 f'{FLAGS.skip_lines}; raise --steps.')
    return statistics.median(rates)


def main(argv):
    del argv
    options = [''] + [entry.strip() for entry in FLAGS.options.split(';') if entry.strip()]
    rates = {option: [] for option in options}
    with tempfile.TemporaryDirectory() as scratch:
        for round_number in range(FLAGS.rounds):
            for index, option in enumerate(options):
                train_dir = os.path.join(scratch, f'round{round_number}_{index}')
                rates[option].append(run_once(option.split(), train_dir))
            print(f'round {round_number + 1}: ' + ', '.join(
                f'{option or "baseline"} {rates[option][-1]:.0f}' for option in options),
                flush=True)
    baseline = rates['']
    print(f'{FLAGS.model_name} on {FLAGS.dataset_name}, batch {FLAGS.batch_size}, '
          f'{FLAGS.rounds} rounds, img/s median and ratio to the baseline, median '
          f'[min, max]:')
    for option in options:
        ratios = [rate / base for rate, base in zip(rates[option], baseline)]
        print(f'  {option or "baseline":<50} {statistics.median(rates[option]):7.0f} img/s  '
              f'{statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]')


if __name__ == '__main__':
    app.run(main)
