"""The Benchmark flag group (issue 22) of the training and evaluation scripts, a definer
as in cli.flags, which lists it in its GROUPS; and the config it gives."""
from typing import Optional

from absl import flags

from core.errors import UsageError
from training.benchmark import throughput as benchmark_lib

# As in cli.flags: the flags belong to the script calling define(), so its --helpfull
# and its flags.txt (cli.run_record) list them.
flags.disclaim_key_flags()

_OPTIONS = ('benchmark_json', 'benchmark_rounds', 'benchmark_steps',
            'benchmark_warmup_steps')


def benchmark(define):
    """--benchmark: time the script's own compiled step instead of training or
    evaluating (training.benchmark; docs/performance.md, "Benchmark mode")."""
    defaults = benchmark_lib.BenchmarkConfig()
    define.bool('benchmark', False, 'Measure speed instead of training (evaluating): '
                'warm-up steps, then --benchmark_rounds timed rounds of the script\'s own '
                'compiled step; prints img/s, forward GFLOP per image, achieved GFLOP/s, '
                'the fraction of a matmul peak measured in this process and, with '
                '--dataset_dir, the share of step time spent waiting for input. Synthetic '
                'data unless --dataset_dir is given; fresh weights (evaluation: '
                '--checkpoint_path\'s if given). Writes no checkpoint and nothing to '
                '--train_dir or --eval_dir.')
    define.string('benchmark_json', None, 'With --benchmark: also write the figures to '
                  'this JSON file (the same fields as printed).')
    define.integer('benchmark_rounds', defaults.rounds, 'With --benchmark: timed rounds; '
                   'each figure is the median [min, max] over them.')
    define.integer('benchmark_steps', defaults.steps_per_round, 'With --benchmark: timed '
                   'steps (evaluation: batches) per round; default: as many as take about '
                   f'{benchmark_lib.ROUND_SECONDS:g} s at the warm-up\'s speed.')
    define.integer('benchmark_warmup_steps', defaults.warmup_steps, 'With --benchmark: '
                   'untimed steps (evaluation: batches) first; the first traces and '
                   'compiles the step.')


def from_flags(flag_values: flags.FlagValues) -> Optional[benchmark_lib.BenchmarkConfig]:
    """The benchmark asked for, or None; a benchmark option without --benchmark is an
    error (it would silently train). A script without the group benchmarks nothing."""
    if 'benchmark' not in flag_values:
        return None
    if not flag_values.benchmark:
        for name in _OPTIONS:
            # Changed from its default, not merely present: a run's flags.txt (the
            # --flagfile that reproduces it) lists every flag.
            if flag_values[name].value != flag_values[name].default:
                raise UsageError(f'--{name} applies to --benchmark; add --benchmark or '
                                 'drop it.')
        return None
    return benchmark_lib.BenchmarkConfig(
        rounds=flag_values.benchmark_rounds, steps_per_round=flag_values.benchmark_steps,
        warmup_steps=flag_values.benchmark_warmup_steps,
        json_path=flag_values.benchmark_json)
