"""The scripts as users run them: bad input ends in one clear line, no traceback.

Every run here is a separate process that imports TensorFlow (~4 s), so the module's
runs are started together, a few at a time, once; each test checks its own result.
"""
import concurrent.futures
import os
import re
import subprocess
import sys

import pytest
from helpers import testing_utils

from helpers.scripts import EVAL, EXPORT, ROOT, TRAIN, run_script

CONVERT, AVERAGE = 'download_and_convert_data.py', 'average_checkpoints.py'
PREDICT = 'predict_image_classifier.py'


SHAPES = ['--dataset_name=shapes', '--dataset_dir={shapes}', '--model_name=cifarnet']
BAD_TRAINING = {
    'no_dataset_dir': (['--dataset_name=shapes', '--model_name=cifarnet'],
                       ['--dataset_dir']),
    'unknown_dataset': (['--dataset_name=imagenet2', '--dataset_dir=/tmp',
                         '--model_name=cifarnet'], ['imagenet2', 'cifar10, flowers, image_folder']),
    'unknown_model': (['--dataset_name=shapes', '--dataset_dir={shapes}',
                       '--model_name=resnet_v9'], ['resnet_v9', 'cifarnet', 'lenet']),
    'unknown_optimizer': (SHAPES + ['--optimizer=adamw2'], ['adamw2', 'rmsprop', 'sgd']),
    'unknown_preprocessing': (SHAPES + ['--preprocessing_name=fancy'],
                              ['fancy', 'cifarnet']),
    'no_files': (['--dataset_name=shapes', '--dataset_dir={empty}',
                  '--model_name=cifarnet'], ['No files match', 'download_and_convert_data.py']),
    'parameter_servers': (SHAPES + ['--num_ps_tasks=1'], ['--num_ps_tasks=1', '--ps_hosts']),
    'bad_cluster': (SHAPES + ['--worker_hosts=localhost:1', '--task=2'],
                    ['out of range', '--task=0..0']),
    'sync_replicas': (SHAPES + ['--sync_replicas'],
                      ['--sync_replicas aggregates gradients on parameter servers']),
    'replicas_to_aggregate': (SHAPES + ['--replicas_to_aggregate=2'],
                              ['--replicas_to_aggregate=2 needs --sync_replicas']),
}
HELP_FLAGS = {
    TRAIN: ['--model_name', '--dataset_dir', '--train_dir', '--optimizer', '--learning_rate',
            '--num_clones', '--moving_average_decay', '--seed', '--tf_log_level'],
    EVAL: ['--checkpoint_path', '--eval_dir', '--dataset_dir', '--model_name', '--batch_size'],
    EXPORT: ['--model_name', '--saved_model_dir', '--output_file'],
    CONVERT: ['--dataset_name', '--dataset_dir', '--source_dir', '--tf_log_level'],
    AVERAGE: ['--checkpoint_dir', '--output_dir', '--num_checkpoints'],
    PREDICT: ['--saved_model_dir', '--image_files', '--dataset_split_name', '--model_name'],
}
# A C++ log line of TensorFlow's: 'E0000 00:00:1795346499.095548    6621 util.cc:131] ...'.
CPP_LOG_LINE = re.compile(r'[IWEF]\d{4} [\d:.]+ +\d+ \S+\.cc:\d+\]')


@pytest.fixture(scope='module')
def results(tmp_path_factory):
    """name -> CompletedProcess of every run this module checks, run concurrently."""
    shapes = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(shapes), num_train=8, num_validation=4)
    work = tmp_path_factory.mktemp('runs')
    runs = {f'train/{name}': (TRAIN, [a.format(shapes=shapes, empty=work) for a in args]
                              + [f'--train_dir={work / name}'])
            for name, (args, _) in BAD_TRAINING.items()}
    runs['eval/no_checkpoint'] = (EVAL, ['--dataset_name=shapes', f'--dataset_dir={shapes}',
                                         '--model_name=cifarnet',
                                         '--dataset_split_name=validation',
                                         f'--checkpoint_path={work}'])
    runs['export/unknown_model'] = (EXPORT, ['--model_name=nope', '--dataset_name=shapes',
                                             f'--saved_model_dir={work}/x'])
    # SGD at lr 1e6 with weight decay 1 multiplies the weights by about -1e6 a step, so
    # the loss overflows within ten steps whatever the data (50 of 50 seeds in a sweep).
    # lr 1e6 alone left 20 of 50 seeds finite: their ReLUs died and the loss stayed huge.
    runs['train/diverging'] = (TRAIN, ['--dataset_name=shapes', f'--dataset_dir={shapes}',
                                       '--model_name=lenet', f'--train_dir={work}/nan',
                                       '--batch_size=4', '--optimizer=sgd',
                                       '--learning_rate=1e6', '--weight_decay=1',
                                       '--max_number_of_steps=50', '--seed=3'])
    for script in HELP_FLAGS:
        runs[f'help/{script}'] = (script, ['--help'])
    # A real process's flag parsing (the rest of the flag mistakes share one process in
    # test_user_mistakes.py).
    runs['train/misspelt_flag'] = (TRAIN, ['--dataset_name=shapes', f'--dataset_dir={shapes}',
                                           '--model_name=lenet', '--max_number_of_steps=1',
                                           '--learing_rate=0.1'])
    photos = tmp_path_factory.mktemp('photos')
    _write_photo_folder(photos / 'my_photos')
    runs['convert/photos'] = (CONVERT, ['--dataset_name=image_folder',
                                        f'--source_dir={photos / "my_photos"}',
                                        f'--dataset_dir={photos / "data"}'])
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(run_script, script, *args)
                   for name, (script, args) in runs.items()}
        return {name: future.result() for name, future in futures.items()}


def _write_photo_folder(source):
    """Two classes of JPEGs as phones write them (one turned by its EXIF orientation,
    which the converter applies), and an empty file."""
    for label, name in enumerate(('forest', 'sea')):
        (source / name).mkdir(parents=True)
        for index in range(2):
            (source / name / f'{index}.jpg').write_bytes(
                testing_utils.encoded_image(20, 24, seed=10 * label + index))
    (source / 'sea' / 'sideways.jpg').write_bytes(testing_utils.with_exif_orientation(
        testing_utils.encoded_image(20, 24, seed=7), 6))
    (source / 'forest' / 'empty.jpg').write_bytes(b'')


def _assert_one_line_error(result, *fragments):
    assert result.returncode != 0
    assert 'Traceback' not in result.stderr
    error_lines = [l for l in result.stderr.splitlines() if l.startswith('ERROR:')]
    assert len(error_lines) == 1, result.stderr[-2000:]
    for fragment in fragments:
        assert fragment in error_lines[0]


@pytest.mark.parametrize('name', sorted(BAD_TRAINING))
def test_train_bad_input(name, results):
    _assert_one_line_error(results[f'train/{name}'], *BAD_TRAINING[name][1])


def test_eval_without_checkpoint_names_the_flag(results):
    _assert_one_line_error(results['eval/no_checkpoint'], 'No checkpoint found')


def test_export_unknown_model_lists_choices(results):
    _assert_one_line_error(results['export/unknown_model'], 'nope', 'cifarnet')


def test_a_diverging_run_ends_in_one_line_naming_the_step(results):
    result = results['train/diverging']
    _assert_one_line_error(result, 'Loss became', 'by step', '--learning_rate')
    assert result.stderr.rstrip().splitlines()[-1].startswith('ERROR: ')


def test_tensorflows_cpp_log_lines_are_silenced_by_default(results):
    # The diverging run imported TensorFlow, built the strategy and trained ten steps:
    # TensorFlow's C++ start-up and runtime lines would show here unless silenced.
    stderr = results['train/diverging'].stderr
    assert 'global step' in stderr or 'Loss became' in stderr, stderr[-2000:]
    assert not [line for line in stderr.splitlines()
                if CPP_LOG_LINE.match(line) or 'absl::InitializeLog' in line], stderr[-2000:]


def test_a_photo_folder_converts_without_tensorflow_lines_and_an_empty_file_says_so(
        results):
    """Turning the sideways photo upright runs a uint8 transpose, at which oneDNN logs
    'E0000 ... oneDNN supports DT_UINT8 only on platforms with AVX-512' at error level
    (on CPUs with AVX-512); the default --tf_log_level=none keeps it out."""
    result = results['convert/photos']
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'Turned 1 JPEG(s) upright' in result.stderr, result.stderr[-3000:]
    assert 'forest/empty.jpg (the file is empty)' in result.stderr, result.stderr[-3000:]
    assert not [line for line in result.stderr.splitlines()
                if CPP_LOG_LINE.match(line) or 'oneDNN' in line], result.stderr[-3000:]


def test_a_misspelt_flag_is_one_error_line_naming_the_closest(results):
    _assert_one_line_error(results['train/misspelt_flag'],
                           'Unknown flag --learing_rate; did you mean --learning_rate?')


@pytest.mark.parametrize('script', sorted(HELP_FLAGS))
def test_help_lists_the_scripts_own_and_shared_flags(script, results):
    result = results[f'help/{script}']
    assert result.returncode == 0 and 'Traceback' not in result.stderr, result.stderr[-2000:]
    # One sentence saying what the script does, not how it is built.
    first = result.stdout.splitlines()[0]
    assert first.endswith('.') and '->' not in first and 'cli.' not in first, first
    listed = {line.split(':')[0].strip().replace('--[no]', '--')
              for line in result.stdout.splitlines() if line.startswith('  --')}
    assert set(HELP_FLAGS[script]) <= listed, sorted(listed)
