"""Self-describing runs: flags.txt reproduces a run, run_info.json says what ran where,
a resumed run with other flags logs each difference."""
import json

import pytest
from absl import flags

from helpers import testing_utils
from cli import run_record

SCRIPT = 'some_script.py'


def _script_flag_values():
    values = flags.FlagValues()
    kwargs = dict(flag_values=values, module_name=SCRIPT)
    flags.DEFINE_string('model_name', 'inception_v3', '', **kwargs)
    flags.DEFINE_float('learning_rate', 0.01, '', **kwargs)
    flags.DEFINE_integer('max_number_of_steps', None, '', **kwargs)
    flags.DEFINE_bool('cache', False, '', **kwargs)
    flags.DEFINE_bool('deterministic', True, '', **kwargs)
    flags.DEFINE_list('top_k', ['1', '5'], '', **kwargs)
    flags.DEFINE_alias('k', 'top_k', **kwargs)
    flags.DEFINE_string('not_the_scripts', 'x', '', flag_values=values, module_name='other')
    return values


def _parsed(*argv):
    values = _script_flag_values()
    values([SCRIPT, *argv])
    return values


def test_flags_file_reproduces_every_flag_of_the_script(tmp_path):
    original = _parsed('--model_name=lenet', '--learning_rate=0.5', '--cache',
                       '--nodeterministic', '--top_k=1,3')
    run_record.record(str(tmp_path), original, SCRIPT, max_number_of_steps=None)
    text = (tmp_path / 'flags.txt').read_text()
    assert text.startswith('# ') and '--not_the_scripts' not in text
    assert '--k=' not in text  # an alias adds nothing to its original
    assert '--max_number_of_steps' not in text  # unset: None stays None
    reproduced = _parsed(f'--flagfile={tmp_path / "flags.txt"}')
    for name in ('model_name', 'learning_rate', 'max_number_of_steps', 'cache',
                 'deterministic', 'top_k'):
        assert reproduced[name].value == original[name].value, name
    # Later flags override the file, as absl's --flagfile does.
    assert _parsed(f'--flagfile={tmp_path / "flags.txt"}',
                   '--learning_rate=0.1').learning_rate == 0.1


def test_a_resumed_run_with_other_flags_logs_each_difference(tmp_path, caplog):
    run_record.record(str(tmp_path), _parsed('--learning_rate=0.5', '--cache'), SCRIPT,
                      max_number_of_steps=None)
    assert run_record.record(str(tmp_path), _parsed('--learning_rate=0.5', '--cache'),
                             SCRIPT, max_number_of_steps=None) == []
    with caplog.at_level('WARNING'):
        differences = run_record.record(
            str(tmp_path), _parsed('--learning_rate=0.1', '--max_number_of_steps=7'),
            SCRIPT, max_number_of_steps=7)
    assert differences == ['--cache: --cache -> --nocache',
                           '--learning_rate: 0.5 -> 0.1',
                           '--max_number_of_steps: (unset) -> 7']
    for difference in differences:
        assert difference in caplog.text
    assert run_record.recorded_max_steps(str(tmp_path)) == 7


def test_run_info_names_versions_devices_and_revision(tmp_path, monkeypatch):
    import platform
    import tensorflow as tf
    run_record.record(str(tmp_path), _parsed(), SCRIPT, max_number_of_steps=12)
    info = json.loads((tmp_path / 'run_info.json').read_text())
    assert info['python'] == platform.python_version()
    assert info['tensorflow'] == tf.__version__
    assert any(device.startswith('CPU: ') for device in info['devices'])
    assert info['max_number_of_steps'] == 12
    if (testing_utils.TEST_DATA.parent.parent / '.git').exists():
        assert info['toolkit_revision']
    # Outside a git checkout (an installed copy) the revision is unknown, not an error.
    monkeypatch.setattr(run_record, '_PROJECT_ROOT', str(tmp_path))
    assert run_record.git_revision() is None


def test_no_record_means_no_known_end(tmp_path):
    assert run_record.recorded_max_steps(str(tmp_path)) is None


# The real scripts, as users run them.

def _train(*args):
    from helpers.scripts import run_script
    result = run_script('train_image_classifier.py', *args)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope='module')
def resumed_run(tmp_path_factory):
    """A 2-step run, then started again from its own flags.txt with one flag changed
    (it has nothing left to train: only the record is new)."""
    root = tmp_path_factory.mktemp('run_record')
    testing_utils.write_small_shapes(str(root / 'data'), num_train=8, num_validation=5)
    train_dir = root / 'train'
    first = _train('--dataset_name=shapes', f'--dataset_dir={root / "data"}',
                   '--model_name=lenet', f'--train_dir={train_dir}', '--batch_size=4',
                   '--max_number_of_steps=2', '--optimizer=momentum', '--seed=3',
                   '--learning_rate_decay_type=cosine', '--clip_gradient_norm=2',
                   '--deterministic', '--label_smoothing=0.1')
    original_flags = (train_dir / 'flags.txt').read_text()
    resumed = _train(f'--flagfile={train_dir / "flags.txt"}', '--log_every_n_steps=1')
    return root, first, original_flags, resumed


def test_flags_txt_reproduces_the_real_script_and_a_resume_logs_the_change(resumed_run):
    root, first, original_flags, resumed = resumed_run
    assert '--learning_rate_decay_type=cosine' in original_flags
    assert '--clip_gradient_norm=2.0' in original_flags
    assert 'learning rate: 0.01, cosine to 0.0001 over 2 steps' in first.stderr
    # Every other flag came back from flags.txt unchanged: only the one given differs.
    differences = [line.split('] ', 1)[1] for line in resumed.stderr.splitlines()
                   if 'run_record.py' in line]
    assert differences[1:] == ['  --log_every_n_steps: 10 -> 1'], differences
    assert 'nothing to train' in resumed.stderr
    assert run_record.recorded_max_steps(str(root / 'train')) == 2


@pytest.mark.slow
def test_eval_script_watches_the_run_to_its_last_checkpoint(resumed_run):
    from helpers.scripts import run_script
    root = resumed_run[0]
    result = run_script('eval_image_classifier.py', '--dataset_name=shapes',
                        f'--dataset_dir={root / "data"}', '--dataset_split_name=validation',
                        '--model_name=lenet', f'--checkpoint_path={root / "train"}',
                        f'--eval_dir={root / "eval"}', '--eval_interval_secs=0.5',
                        '--eval_timeout_secs=120', '--backfill', '--num_clones=2',
                        '--clone_on_cpu', '--batch_size=2', '--top_k=1,2')
    assert result.returncode == 0, result.stderr[-3000:]
    history = [json.loads(line) for line in
               (root / 'eval' / 'metrics.jsonl').read_text().splitlines()]
    assert [entry['global_step'] for entry in history] == [2]
    assert history[0]['num_examples'] == 5 and 'Recall_2' in history[0]
    assert 'is the training\'s last (step 2 of 2)' in result.stderr
