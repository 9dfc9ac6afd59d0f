"""--benchmark and its options -> the jobs' BenchmarkConfig; options without it refused."""
import pytest

from cli import configs, train_job
from cli import flags as cli_flags
from core.errors import UsageError
from training.benchmark.throughput import BenchmarkConfig

TRAIN, EVAL = cli_flags.SCRIPTS[:2]


@pytest.mark.parametrize('script, make_job', [(TRAIN, configs.training_from_flags),
                                              (EVAL, configs.evaluation_from_flags)])
def test_benchmark_flags_make_the_jobs_benchmark(script, make_job, parsed, tmp_path):
    job = make_job(parsed(script, '--benchmark', '--benchmark_rounds=3',
                          '--benchmark_steps=4', '--benchmark_warmup_steps=2',
                          f'--benchmark_json={tmp_path}/b.json'))
    assert job.benchmark == BenchmarkConfig(rounds=3, steps_per_round=4, warmup_steps=2,
                                            json_path=f'{tmp_path}/b.json')
    assert make_job(parsed(script)).benchmark is None


@pytest.mark.parametrize('option', ['--benchmark_rounds=3', '--benchmark_json=b.json'])
def test_a_benchmark_option_without_benchmark_is_refused(option, parsed):
    with pytest.raises(UsageError, match=f'{option.split("=")[0]} applies to --benchmark'):
        configs.training_from_flags(parsed(TRAIN, option))


def test_benchmark_and_dry_run_restore_are_refused_together(parsed, tmp_path):
    job = configs.training_from_flags(parsed(TRAIN, '--benchmark', '--dry_run_restore',
                                             f'--train_dir={tmp_path}'))
    with pytest.raises(UsageError, match='--benchmark or --dry_run_restore, not both'):
        train_job.run(job)


def test_options_at_their_defaults_are_accepted_without_benchmark(parsed):
    """A run's flags.txt lists every flag; read back with --flagfile, it trains."""
    job = configs.training_from_flags(parsed(TRAIN, '--nobenchmark', '--benchmark_rounds=5',
                                             '--benchmark_warmup_steps=3'))
    assert job.benchmark is None
