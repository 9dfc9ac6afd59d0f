"""--benchmark through the scripts: every figure printed and written to JSON, exit 0,
nothing written where training or evaluation would write. One round each: the peak is
sampled for 2 s before and after a round (tests/cli/test_benchmark_job.py runs both
jobs in-process, briefly)."""
import json

import pytest
from helpers.scripts import run_script

LABELS = ('speed', 'forward', 'achieved', 'matmul peak', 'of peak', 'input wait')
QUICK = ['--benchmark', '--benchmark_rounds=1', '--benchmark_steps=3',
         '--benchmark_warmup_steps=2']


def _figures(stdout):
    """{label: rest of line} of the printed block."""
    block = stdout[stdout.index('Benchmark: '):].splitlines()
    return {label: line.strip()[len(label):].strip() for line in block[1:]
            for label in LABELS if line.strip().startswith(label + ' ')}


def test_training_benchmark_prints_writes_json_and_no_checkpoint(tmp_path):
    train_dir, json_path = tmp_path / 'train', tmp_path / 'out' / 'benchmark.json'
    result = run_script('train_image_classifier.py', '--model_name=cifarnet',
                        '--dataset_name=cifar10', f'--train_dir={train_dir}', *QUICK,
                        f'--benchmark_json={json_path}')
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'Benchmark: cifarnet training, float32, batch 32, 32x32x3, synthetic data' \
        in result.stdout
    figures = _figures(result.stdout)
    assert set(figures) == set(LABELS), result.stdout
    written = json.loads(json_path.read_text())
    # cifarnet's forward pass: 2 x 32,778,112 multiply-adds (tests/training).
    assert written['forward_gflop_per_image'] == 0.065556224
    assert figures['forward'].startswith('0.0656 GFLOP per image')
    median = written['images_per_second']['median']
    # Three significant figures; from 100 on whole numbers with a thousands separator
    # (cifarnet passes 1,000 img/s on a faster CPU).
    shown = f'{median:,.0f}' if median >= 100 else f'{median:.3g}'
    assert figures['speed'].startswith(f'{shown} img/s median [')
    assert (written['rounds'], written['steps_per_round']) == (1, 3)
    assert written['peak']['dtype'] == 'float32' and written['peak']['matrix_size'] == 4096
    assert written['peak']['seconds_sampled'] == 2
    assert len(written['fraction_of_peak']['per_round']) == 1
    assert written['input_wait_fraction'] is None  # synthetic data
    # Nothing written but the JSON: no train_dir, no checkpoint anywhere here.
    assert not train_dir.exists()
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob('*') if p.is_file()] == [
        json_path.relative_to(tmp_path)]


@pytest.mark.slow  # the job's wiring runs in the fast suite in-process (tests/cli)
def test_evaluation_benchmark_on_real_data_measures_the_input_wait(tmp_path, shapes_dir):
    eval_dir = tmp_path / 'eval'
    result = run_script('eval_image_classifier.py', '--model_name=cifarnet',
                        '--dataset_name=shapes', f'--dataset_dir={shapes_dir}',
                        '--dataset_split_name=validation', f'--eval_dir={eval_dir}',
                        *QUICK)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f'cifarnet evaluation, float32, batch 100, 32x32x3, shapes/validation ' \
        f'from {shapes_dir}' in result.stdout
    figures = _figures(result.stdout)
    assert set(figures) == set(LABELS), result.stdout
    assert ' % median [' in figures['input wait']
    assert 'forward x img/s' in figures['achieved']
    assert not eval_dir.exists()
