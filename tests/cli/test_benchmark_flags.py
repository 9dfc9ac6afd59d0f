"""--benchmark and its options -> the BenchmarkConfig the scripts time their job with;
options without it refused."""
import pytest

from cli import benchmark_job, configs
from cli import flags as cli_flags
from core.errors import UsageError
from training.benchmark.throughput import BenchmarkConfig

TRAIN, EVAL = cli_flags.SCRIPTS[:2]


@pytest.mark.parametrize('script', [TRAIN, EVAL])
def test_benchmark_flags_make_the_benchmark(script, parsed, tmp_path):
    benchmark = configs.benchmark_from_flags(parsed(
        script, '--benchmark', '--benchmark_rounds=3', '--benchmark_steps=4',
        '--benchmark_warmup_steps=2', f'--benchmark_json={tmp_path}/b.json'))
    assert benchmark == BenchmarkConfig(rounds=3, steps_per_round=4, warmup_steps=2,
                                        json_path=f'{tmp_path}/b.json')
    assert configs.benchmark_from_flags(parsed(script)) is None


@pytest.mark.parametrize('option', ['--benchmark_rounds=3', '--benchmark_json=b.json'])
def test_a_benchmark_option_without_benchmark_is_refused(option, parsed):
    with pytest.raises(UsageError, match=f'{option.split("=")[0]} applies to --benchmark'):
        configs.benchmark_from_flags(parsed(TRAIN, option))


def test_benchmark_and_dry_run_restore_are_refused_together(parsed, tmp_path):
    values = parsed(TRAIN, '--benchmark', '--dry_run_restore', f'--train_dir={tmp_path}')
    with pytest.raises(UsageError, match='--benchmark or --dry_run_restore, not both'):
        benchmark_job.time_training(configs.training_from_flags(values),
                                    configs.benchmark_from_flags(values))


def test_options_at_their_defaults_are_accepted_without_benchmark(parsed):
    """A run's flags.txt lists every flag; read back with --flagfile, it trains."""
    assert configs.benchmark_from_flags(parsed(
        TRAIN, '--nobenchmark', '--benchmark_rounds=5', '--benchmark_warmup_steps=3')) is None
