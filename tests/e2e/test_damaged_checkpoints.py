"""The last good checkpoint, through the scripts: with the newest checkpoint truncated,
emptied, bit-flipped or without its .index, evaluation evaluates the one before and
training resumes from it, each with one warning and no traceback; the damaged files
are kept and the `checkpoint` file lists only what exists. Eval writes nothing there."""
import json
import os
import shutil

import pytest
import tensorflow as tf
from helpers import testing_utils
from helpers.scripts import EVAL, TRAIN, run_script

MAX_STEPS = 6


def _train_flags(data, train_dir):
    return ['--dataset_name=shapes', f'--dataset_dir={data}', '--model_name=lenet',
            f'--train_dir={train_dir}', '--batch_size=4', '--optimizer=sgd', '--seed=1',
            '--log_every_n_steps=2', '--save_interval_secs=0',
            f'--max_number_of_steps={MAX_STEPS}']


def _eval_flags(data, checkpoint_path, eval_dir, *flags):
    return ['--dataset_name=shapes', '--dataset_split_name=validation',
            f'--dataset_dir={data}', '--model_name=lenet', f'--checkpoint_path={checkpoint_path}',
            f'--eval_dir={eval_dir}', *flags]


@pytest.fixture(name='trained', scope='module')
def fixture_trained(tmp_path_factory):
    """(dataset dir, a train_dir with checkpoints of steps 1, 2, 4, 6), made once."""
    root = tmp_path_factory.mktemp('damaged_checkpoints')
    data, train_dir = root / 'data', root / 'train'
    testing_utils.write_small_shapes(str(data), num_train=16, num_validation=4)
    result = run_script(TRAIN, *_train_flags(data, train_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    assert tf.train.latest_checkpoint(str(train_dir)).endswith(f'model.ckpt-{MAX_STEPS}')
    return data, train_dir


def _copy(trained, tmp_path):
    train_dir = tmp_path / 'train'
    shutil.copytree(trained[1], train_dir)
    return trained[0], train_dir


def _data_file(prefix):
    return f'{prefix}.data-00000-of-00001'


def _flip_a_byte(path):
    with open(path, 'r+b') as f:
        f.seek(os.path.getsize(path) // 2)
        value = f.read(1)[0]
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([value ^ 0xFF]))


DAMAGE = {  # how, and what the warning says is wrong
    'truncated': (lambda p: os.truncate(_data_file(p), 1000),
                  'model.ckpt-6.data-00000-of-00001 is truncated (1000 bytes)'),
    'zero-length': (lambda p: os.truncate(_data_file(p), 0),
                    'model.ckpt-6.data-00000-of-00001 is empty (0 bytes)'),
    'bit-flipped': (lambda p: _flip_a_byte(_data_file(p)),
                    'model.ckpt-6.data-00000-of-00001 fails its checksum'),
    'index removed': (lambda p: os.remove(p + '.index'), 'model.ckpt-6.index is missing'),
}


def _one_warning(stderr, prefix, description):
    assert 'Traceback' not in stderr, stderr[-3000:]
    warnings = [line for line in stderr.splitlines() if 'is damaged' in line]
    assert len(warnings) == 1, stderr[-3000:]
    assert warnings[0].startswith('W')
    assert f'Checkpoint {prefix} is damaged ({description}' in warnings[0]
    return warnings[0]


def _snapshot(train_dir):
    return {path: path.read_bytes() if path.is_file() else None
            for path in sorted(train_dir.rglob('*'))}


# One kind in `make test` (its 15 minutes), all four in `make test-slow`; the unit
# tests (tests/training/test_checkpoint_integrity.py) cover every kind.
@pytest.mark.parametrize('damage', [
    damage if damage == 'truncated' else
    pytest.param(damage, marks=pytest.mark.slow) for damage in DAMAGE])
def test_eval_and_training_use_the_checkpoint_before_a_damaged_one(trained, tmp_path,
                                                                   damage):
    data, train_dir = _copy(trained, tmp_path)
    damaged, previous = train_dir / 'model.ckpt-6', train_dir / 'model.ckpt-4'
    harm, description = DAMAGE[damage]
    harm(str(damaged))
    damaged_files = {name: (train_dir / name).read_bytes() for name in os.listdir(train_dir)
                     if name.startswith('model.ckpt-6.')}

    before = _snapshot(train_dir)
    evaluated = run_script(EVAL, *_eval_flags(data, train_dir, tmp_path / 'eval'))
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    warning = _one_warning(evaluated.stderr, damaged, description)
    assert f'using {previous}, the newest intact checkpoint' in warning
    assert 'eval/Accuracy:' in evaluated.stdout
    metrics = json.loads((tmp_path / 'eval' / 'metrics.json').read_text())
    assert metrics['checkpoint'] == str(previous) and metrics['global_step'] == 4
    assert _snapshot(train_dir) == before  # eval wrote nothing into the train_dir

    resumed = run_script(TRAIN, *_train_flags(data, train_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    warning = _one_warning(resumed.stderr, damaged, description)
    assert f'resuming from {previous}, the newest intact checkpoint' in warning
    assert f'Resumed from {previous} at step 4.' in resumed.stderr
    state = tf.train.get_checkpoint_state(str(train_dir))
    assert state.model_checkpoint_path == str(damaged)  # saved anew at step 6
    listed = list(state.all_model_checkpoint_paths)
    assert all(os.path.exists(prefix + '.index') for prefix in listed)
    # The damaged files were moved aside before step 6 was saved again, intact.
    kept = {path.name: path.read_bytes()
            for path in (train_dir / 'damaged_checkpoints').rglob('model.ckpt-6.*')}
    assert kept == damaged_files
    assert tf.train.load_checkpoint(str(damaged)).get_tensor(
        'global_step/.ATTRIBUTES/VARIABLE_VALUE') == 6


def test_a_named_damaged_checkpoint_is_one_error_line(trained, tmp_path):
    data, train_dir = _copy(trained, tmp_path)
    os.truncate(_data_file(train_dir / 'model.ckpt-6'), 1000)
    result = run_script(EVAL, *_eval_flags(data, train_dir / 'model.ckpt-6',
                                           tmp_path / 'eval'))
    assert result.returncode == 1 and 'Traceback' not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith('ERROR:')]
    assert errors == [
        f'ERROR: Checkpoint {train_dir}/model.ckpt-6 is damaged (model.ckpt-6.data-00000-'
        f'of-00001 is truncated (1000 bytes)); pass another checkpoint, or its directory '
        f'{train_dir} to use the newest intact one there.']


def test_continuous_eval_starts_from_the_newest_intact_checkpoint(trained, tmp_path):
    data, train_dir = _copy(trained, tmp_path)
    _flip_a_byte(_data_file(train_dir / 'model.ckpt-6'))
    result = run_script(EVAL, *_eval_flags(data, train_dir, tmp_path / 'eval',
                                           '--eval_interval_secs=1',
                                           '--eval_timeout_secs=3'))
    assert result.returncode == 0, result.stderr[-3000:]
    warning = _one_warning(result.stderr, train_dir / 'model.ckpt-6',
                           'model.ckpt-6.data-00000-of-00001 fails its checksum')
    assert f'evaluating {train_dir}/model.ckpt-4, the newest intact checkpoint' in warning
    history = (tmp_path / 'eval' / 'metrics.jsonl').read_text().splitlines()
    assert [json.loads(line)['global_step'] for line in history] == [4]
