"""The Benchmark flags of the training and evaluation scripts (issue 22; defined in
cli.flag_groups.evaluate) -> the config they give."""
from typing import Optional

from absl import flags

from core.errors import UsageError
from training.benchmark import throughput as benchmark_lib

_OPTIONS = ('benchmark_json', 'benchmark_rounds', 'benchmark_steps',
            'benchmark_warmup_steps')


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
