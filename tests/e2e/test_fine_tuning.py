"""TF-Slim's fine-tuning recipe through the scripts: a model-zoo checkpoint (TF1 names,
1001 classes) -> a new class count on `shapes` -> evaluation -> export.

Each model's script runs start together (see test_scripts.py on why), in two waves: the
restore checks and the fine-tuning, then evaluation and export of what it trained.
"""
import concurrent.futures
import json

import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils
from helpers.scripts import EVAL, EXPORT, TRAIN, run_script

from core.naming import slim_name
from nets import nets_factory
from training.checkpoints import restore as restore_lib

# model -> (image size small enough for a fast test, the scopes of its classifier).
FINE_TUNED = {
    'inception_v3': (107, 'InceptionV3/Logits,InceptionV3/AuxLogits'),
    'mobilenet_v1': (64, 'MobilenetV1/Logits'),
}
STEPS = 3


def _model_zoo_checkpoint(directory, model_name, image_size):
    """The net's variables at 1001 classes, valued by slim_reference's weights rule."""
    net = nets_factory.get_network_fn(model_name, 1001)
    net.build((image_size, image_size, 3))
    values = {slim_name(v): testing_utils.golden_weight_value(slim_name(v), v.shape)
              for v in net.variables}
    values['global_step'] = np.int64(906_000)
    return testing_utils.write_tf1_checkpoint(directory / f'{model_name}.ckpt', values), values


def _run_all(runs):
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(run_script, script, *args, timeout=600)
                   for name, (script, args) in runs.items()}
        return {name: future.result() for name, future in futures.items()}


# inception_v3's recipe takes ~40 s: make test-slow; mobilenet_v1 covers make test.
@pytest.fixture(scope='module', params=[
    pytest.param(name, marks=[pytest.mark.slow] if name == 'inception_v3' else [])
    for name in sorted(FINE_TUNED)])
def recipe(request, tmp_path_factory):
    model_name = request.param
    image_size, scopes = FINE_TUNED[model_name]
    work = tmp_path_factory.mktemp(model_name)
    shapes = work / 'shapes'
    testing_utils.write_small_shapes(str(shapes), num_train=16, num_validation=8)
    checkpoint, values = _model_zoo_checkpoint(work, model_name, image_size)
    data = ['--dataset_name=shapes', f'--dataset_dir={shapes}', f'--model_name={model_name}']
    train = data + ['--batch_size=4', f'--train_image_size={image_size}', '--seed=1',
                    f'--checkpoint_path={checkpoint}', '--optimizer=sgd',
                    '--learning_rate=0.1', '--weight_decay=0']
    runs = _run_all({
        'no_exclude': (TRAIN, train + [f'--train_dir={work}/no_exclude']),
        'dry_run': (TRAIN, train + [f'--train_dir={work}/dry', '--dry_run_restore',
                                    f'--checkpoint_exclude_scopes={scopes}']),
        'fine_tune': (TRAIN, train + [f'--train_dir={work}/train',
                                      f'--checkpoint_exclude_scopes={scopes}',
                                      f'--trainable_scopes={scopes}',
                                      f'--max_number_of_steps={STEPS}']),
        'eval_zoo': (EVAL, data + [f'--checkpoint_path={checkpoint}',
                                   '--dataset_split_name=validation',
                                   f'--eval_image_size={image_size}',
                                   f'--eval_dir={work}/eval_zoo']),
    })
    runs.update(_run_all({
        'eval': (EVAL, data + [f'--checkpoint_path={work}/train', '--batch_size=4',
                               '--dataset_split_name=validation',
                               f'--eval_image_size={image_size}', f'--eval_dir={work}/eval']),
        'export': (EXPORT, ['--dataset_name=shapes', f'--model_name={model_name}',
                            f'--checkpoint_path={work}/train', f'--image_size={image_size}',
                            f'--saved_model_dir={work}/export']),
    }))
    return dict(model_name=model_name, image_size=image_size, scopes=scopes.split(','),
                work=work, checkpoint=checkpoint, values=values, runs=runs)


def _one_error_line(result):
    assert result.returncode == 1 and 'Traceback' not in result.stderr, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith('ERROR:')]
    assert len(lines) == 1, result.stderr[-3000:]
    return lines[0]


def test_new_class_count_error_names_the_exact_exclude_scopes(recipe):
    line = _one_error_line(recipe['runs']['no_exclude'])
    assert 'the checkpoint has 1001 classes, the model 10' in line
    named = line.rsplit('--checkpoint_exclude_scopes=', 1)[1].rstrip('.')
    assert sorted(named.split(',')) == sorted(recipe['scopes'])


def test_dry_run_reports_the_restore_and_trains_nothing(recipe):
    result = recipe['runs']['dry_run']
    assert result.returncode == 0, result.stderr[-3000:]
    head_variables = [n for n in recipe['values']
                      if any(n.startswith(s) for s in recipe['scopes'])]
    restored = len(recipe['values']) - 1 - len(head_variables)  # minus global_step
    assert (f'{restored} restored, {len(head_variables)} excluded, 0 missing, '
            f'0 shape-mismatched, 0 only in the checkpoint.') in result.stdout
    assert f'    {head_variables[0]}\n' in result.stdout  # names listed
    assert not (recipe['work'] / 'dry').exists() or not any((recipe['work'] / 'dry').iterdir())


def test_fine_tuning_trains_only_the_trainable_scopes(recipe):
    result = recipe['runs']['fine_tune']
    assert result.returncode == 0, result.stderr[-3000:]
    net = nets_factory.get_network_fn(recipe['model_name'], 10)
    net.build((recipe['image_size'],) * 2 + (3,))
    assert restore_lib.restore_network(net, str(recipe['work'] / 'train')) == STEPS
    in_scopes = lambda name: any(name.startswith(s) for s in recipe['scopes'])  # noqa: E731
    for variable in net.trainable_variables:
        name = slim_name(variable)
        if not in_scopes(name):  # restored and frozen: exactly the checkpoint's values
            np.testing.assert_array_equal(variable.numpy(), recipe['values'][name], name)
    # The new classifier's biases start at zero (slim's initialiser) and were trained.
    head_biases = [v for v in net.trainable_variables
                   if in_scopes(slim_name(v)) and slim_name(v).endswith('biases')
                   and v.shape == [10]]
    assert head_biases and all(np.abs(v.numpy()).max() > 0 for v in head_biases)


def test_evaluating_the_zoo_checkpoint_on_other_classes_names_the_fix(recipe):
    line = _one_error_line(recipe['runs']['eval_zoo'])
    assert 'the checkpoint has 1001 classes, the model 10' in line
    assert '--checkpoint_exclude_scopes' not in line  # evaluation cannot leave layers out


def test_fine_tuned_model_evaluates(recipe):
    result = recipe['runs']['eval']
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((recipe['work'] / 'eval' / 'metrics.json').read_text())
    assert metrics['global_step'] == STEPS
    assert metrics['num_examples'] == 8
    assert 0.0 <= metrics['Accuracy'] <= 1.0


def test_fine_tuned_model_exports_what_it_computes(recipe):
    result = recipe['runs']['export']
    assert result.returncode == 0, result.stderr[-3000:]
    net = nets_factory.get_network_fn(recipe['model_name'], 10)
    size = recipe['image_size']
    net.build((size, size, 3))
    restore_lib.restore_network(net, str(recipe['work'] / 'train'))
    images = np.random.default_rng(5).uniform(-1, 1, (2, size, size, 3)).astype(np.float32)
    expected = net(images, training=False)[0].numpy()
    serve = tf.saved_model.load(str(recipe['work'] / 'export')).signatures['serving_preprocessed']
    logits = serve(images=tf.constant(images))['logits'].numpy()
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
