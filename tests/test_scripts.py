"""The scripts as users run them: bad input ends in one clear line, no traceback."""
import os
import subprocess
import sys

import pytest
import testing_utils

ROOT = testing_utils.TEST_DATA.parent.parent


def run_script(script, *args, timeout=300):
    """Runs a script as a user would (TensorFlow's log level left to the script)."""
    env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
    env['PYTHONPATH'] = str(ROOT)
    return subprocess.run([sys.executable, str(ROOT / script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope='module')
def small_shapes_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(directory), num_train=8, num_validation=4)
    return str(directory)


def _assert_one_line_error(result, *fragments):
    assert result.returncode != 0
    assert 'Traceback' not in result.stderr
    error_lines = [l for l in result.stderr.splitlines() if l.startswith('ERROR:')]
    assert len(error_lines) == 1, result.stderr[-2000:]
    for fragment in fragments:
        assert fragment in error_lines[0]


TRAIN = 'train_image_classifier.py'


@pytest.mark.parametrize('args, fragments', [
    (['--dataset_name=shapes', '--model_name=cifarnet'], ['--dataset_dir']),
    (['--dataset_name=imagenet2', '--dataset_dir=/tmp', '--model_name=cifarnet'],
     ['imagenet2', 'cifar10, mnist, shapes']),
    (['--dataset_name=shapes', '--dataset_dir={shapes}', '--model_name=resnet_v9'],
     ['resnet_v9', 'cifarnet', 'lenet']),
    (['--dataset_name=shapes', '--dataset_dir={shapes}', '--model_name=cifarnet',
      '--optimizer=adamw2'], ['adamw2', 'rmsprop', 'sgd']),
    (['--dataset_name=shapes', '--dataset_dir={shapes}', '--model_name=cifarnet',
      '--preprocessing_name=fancy'], ['fancy', 'cifarnet']),
    (['--dataset_name=shapes', '--dataset_dir={empty}', '--model_name=cifarnet'],
     ['No files match', 'download_and_convert_data.py']),
    (['--dataset_name=shapes', '--dataset_dir={shapes}', '--model_name=cifarnet',
      '--num_ps_tasks=1'], ['not implemented yet']),
    (['--dataset_name=shapes', '--dataset_dir={shapes}', '--model_name=cifarnet',
      '--sync_replicas'], ['--sync_replicas', 'not implemented yet']),
    (['--dataset_name=shapes', '--dataset_dir={shapes}', '--model_name=cifarnet',
      '--replicas_to_aggregate=2'], ['--replicas_to_aggregate', 'not implemented yet']),
])
def test_train_bad_input(args, fragments, small_shapes_dir, tmp_path):
    args = [a.format(shapes=small_shapes_dir, empty=tmp_path) for a in args]
    result = run_script(TRAIN, *args, f'--train_dir={tmp_path / "train"}')
    _assert_one_line_error(result, *fragments)


def test_eval_without_checkpoint_names_the_flag(small_shapes_dir, tmp_path):
    result = run_script('eval_image_classifier.py', '--dataset_name=shapes',
                        f'--dataset_dir={small_shapes_dir}', '--model_name=cifarnet',
                        '--dataset_split_name=validation', f'--checkpoint_path={tmp_path}')
    _assert_one_line_error(result, 'No checkpoint found')


def test_export_unknown_model_lists_choices(tmp_path):
    result = run_script('export_inference_graph.py', '--model_name=nope',
                        '--dataset_name=shapes', f'--saved_model_dir={tmp_path}/x')
    _assert_one_line_error(result, 'nope', 'cifarnet')


def test_a_diverging_run_ends_in_one_line_naming_the_step(small_shapes_dir, tmp_path):
    # lenet with plain SGD at lr 1e6 overflows to NaN within the first ten steps.
    result = run_script(TRAIN, '--dataset_name=shapes', f'--dataset_dir={small_shapes_dir}',
                        '--model_name=lenet', f'--train_dir={tmp_path / "train"}',
                        '--batch_size=4', '--optimizer=sgd', '--learning_rate=1e6',
                        '--max_number_of_steps=50', '--seed=3')
    _assert_one_line_error(result, 'Loss became', 'by step', '--learning_rate')
    assert result.stderr.rstrip().splitlines()[-1].startswith('ERROR: ')


@pytest.mark.parametrize('script, flags', [
    (TRAIN, ['--model_name', '--dataset_dir', '--train_dir', '--optimizer',
             '--learning_rate', '--num_clones', '--moving_average_decay', '--seed',
             '--tf_log_level']),
    ('eval_image_classifier.py', ['--checkpoint_path', '--eval_dir', '--dataset_dir',
                                  '--model_name', '--batch_size']),
    ('export_inference_graph.py', ['--model_name', '--saved_model_dir', '--output_file']),
])
def test_help_lists_the_scripts_own_and_shared_flags(script, flags):
    result = run_script(script, '--help')  # absl exits 1 after printing the help
    assert 'Traceback' not in result.stderr, result.stderr[-2000:]
    listed = {line.split(':')[0].strip().replace('--[no]', '--')
              for line in result.stdout.splitlines() if line.startswith('  --')}
    assert set(flags) <= listed, sorted(listed)
