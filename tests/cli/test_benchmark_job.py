"""cli.benchmark_job in this process: the training and evaluation jobs as the scripts
build them from flags, timed instead of run, and what it refuses (tests/e2e/
test_benchmark.py runs the scripts). Small nets, a small matmul peak sampled briefly."""
import dataclasses
import json

import pytest

from cli import benchmark_job, configs
from cli import flags as cli_flags
from core.errors import UsageError
from helpers import testing_utils
from training.benchmark.throughput import BenchmarkConfig

TRAIN, EVAL = cli_flags.SCRIPTS[:2]
QUICK = BenchmarkConfig(rounds=2, steps_per_round=2, warmup_steps=1, peak_matrix_size=256,
                        peak_seconds=0.01)


def test_training_benchmark_times_the_jobs_trainer_and_writes_nothing(parsed, tmp_path,
                                                                     capsys):
    train_dir, json_path = tmp_path / 'train', tmp_path / 'figures.json'
    job = configs.training_from_flags(parsed(
        TRAIN, '--model_name=lenet', '--dataset_name=mnist', f'--train_dir={train_dir}',
        '--batch_size=4'))
    run = benchmark_job.time_training(job, dataclasses.replace(QUICK,
                                                               json_path=str(json_path)))
    assert 'Benchmark: lenet training, float32, batch 4, 28x28x1, synthetic data' \
        in capsys.readouterr().out
    assert (run.result.rounds, run.result.steps_per_round) == (2, 2)
    assert run.result.input_wait is None
    assert json.loads(json_path.read_text())['task'] == 'training'
    assert not train_dir.exists()


def test_evaluation_benchmark_on_the_split_measures_the_input_wait(parsed, tmp_path):
    testing_utils.write_small_shapes(tmp_path / 'data')
    eval_dir = tmp_path / 'eval'
    job = configs.evaluation_from_flags(parsed(
        EVAL, '--model_name=lenet', '--dataset_name=shapes',
        f'--dataset_dir={tmp_path / "data"}', '--dataset_split_name=validation',
        f'--eval_dir={eval_dir}', '--batch_size=4'))
    result = benchmark_job.time_evaluation(job, QUICK).result
    assert result.setting.data == f'shapes/validation from {tmp_path / "data"}'
    assert result.setting.task == 'evaluation' and result.input_wait is not None
    assert not eval_dir.exists()


@pytest.mark.parametrize('script, flags, match', [
    (TRAIN, ['--dry_run_restore'], '--benchmark or --dry_run_restore, not both'),
    (TRAIN, ['--ps_hosts=localhost:2220', '--worker_hosts=localhost:2221',
             '--job_name=worker', '--task=0'], 'one process.*drop the cluster flags'),
    (EVAL, ['--checkpoint_path=/no/train_dir', '--eval_interval_secs=1'],
     '--benchmark times one evaluation; drop --eval_interval_secs'),
    (EVAL, ['--recompute_batch_norm_statistics=2'], 'one checkpoint; drop --benchmark'),
])
def test_what_the_benchmark_refuses(parsed, tmp_path, script, flags, match):
    values = parsed(script, '--model_name=lenet', *flags)
    if script == TRAIN:
        time, job = benchmark_job.time_training, configs.training_from_flags(values)
    else:
        time, job = benchmark_job.time_evaluation, configs.evaluation_from_flags(values)
    with pytest.raises(UsageError, match=match):
        time(job, QUICK)
