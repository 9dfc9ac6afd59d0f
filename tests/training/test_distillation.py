"""Knowledge distillation (training.recipes.distillation, losses.distillation_loss): the loss is
Hinton et al.'s formula; the teacher is restored from either kind of checkpoint, frozen,
kept out of the student's checkpoints, and composes with clones, gradient accumulation
and mixing; and, through the scripts, a student trained with a teacher against one
without (slow).

Student: lenet (no batch norm, dropout off); teacher: cifarnet (dropout, off in
inference), both on 32x32x3 images. Tolerance of the replica/accumulation comparison:
1e-5 relative, or 1e-6 absolute for weights near 0 (1e-5 of their ~0.1 scale): float32
sums in another order (measured up to 5e-7).
"""
import json
import math

import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils
from helpers.scripts import EVAL, TRAIN, run_script

from core.errors import UsageError
from core.naming import slim_name
from nets import nets_factory
from training.recipes import batch_mixing
from training.checkpoints import restore as restore_lib
from training.recipes import distillation
from training.recipes import losses
from training.recipes import optimizers
from training.loop import trainer as trainer_lib

IMAGE_SHAPE = (32, 32, 3)
RTOL, ATOL = 1e-5, 1e-6


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# --- The loss. ---

@pytest.mark.parametrize('temperature', [1.0, 4.0])
def test_the_loss_is_hintons_formula(temperature):
    rng = np.random.default_rng(0)
    student, teacher = rng.normal(size=(2, 5, 7)).astype(np.float32) * 3
    p_teacher = _softmax(teacher / temperature)
    p_student = _softmax(student / temperature)
    expected = temperature ** 2 * np.mean(
        np.sum(p_teacher * (np.log(p_teacher) - np.log(p_student)), axis=-1))
    got = float(losses.distillation_loss(student, teacher, temperature))
    assert got == pytest.approx(expected, rel=1e-5)


def test_the_loss_by_hand():
    # softmax([ln 3, 0]) = [3/4, 1/4] against [1/2, 1/2]: 3/4 ln(3/2) + 1/4 ln(1/2).
    by_hand = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    got = losses.distillation_loss([[0.0, 0.0]], [[math.log(3.0), 0.0]], 1.0)
    assert float(got) == pytest.approx(by_hand, rel=1e-6)
    # At T = 4: softmax([ln 3 / 4, 0]) against [1/2, 1/2], times 16.
    p = 3 ** 0.25 / (3 ** 0.25 + 1)
    by_hand = 16 * (p * math.log(2 * p) + (1 - p) * math.log(2 * (1 - p)))
    got = losses.distillation_loss([[0.0, 0.0]], [[math.log(3.0), 0.0]], 4.0)
    assert float(got) == pytest.approx(by_hand, rel=1e-5)


@pytest.mark.parametrize('temperature', [1.0, 4.0])
def test_the_loss_is_zero_when_student_and_teacher_agree(temperature):
    logits = np.random.default_rng(1).normal(size=(6, 10)).astype(np.float32) * 5
    assert abs(float(losses.distillation_loss(logits, logits, temperature))) < 1e-6


class _NoRegularization:
    @staticmethod
    def regularization_losses():
        return []


def test_the_terms_weigh_the_hard_loss_and_compose_with_mixed_smoothed_labels():
    rng = np.random.default_rng(2)
    student = tf.constant(rng.normal(size=(4, 10)), tf.float32)
    teacher_logits = tf.constant(rng.normal(size=(4, 10)), tf.float32)
    labels = losses.MixedLabels(tf.constant([1, 2, 3, 4]), tf.constant([4, 3, 2, 1]),
                                tf.constant(0.7))
    teacher = losses.TeacherLogits(teacher_logits, 0.25, 4.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([student, teacher_logits])
        terms = losses.compute_losses(student, {}, labels, _NoRegularization(), 0.1,
                                      teacher)
    hard = float(losses.softmax_cross_entropy(student, labels, 0.1))
    assert set(terms) == {'cross_entropy', 'distillation'}
    assert float(terms['cross_entropy']) == pytest.approx(0.75 * hard, rel=1e-6)
    assert float(terms['distillation']) == pytest.approx(
        0.25 * float(losses.distillation_loss(student, teacher_logits, 4.0)), rel=1e-6)
    assert tape.gradient(terms['distillation'], teacher_logits) is None
    assert tape.gradient(terms['distillation'], student) is not None
    # Without a teacher, the terms as before.
    plain = losses.compute_losses(student, {}, labels, _NoRegularization(), 0.1)
    assert set(plain) == {'cross_entropy'}
    assert float(plain['cross_entropy']) == pytest.approx(hard, rel=1e-6)


# --- The configuration: one line per mistake. ---

@pytest.mark.parametrize('options, match', [
    (dict(teacher_model_name='cifarnet'), '--teacher_model_name needs '
                                          '--teacher_checkpoint_path'),
    (dict(teacher_checkpoint_path='/ckpt'), '--teacher_checkpoint_path needs '
                                            '--teacher_model_name'),
    (dict(teacher_model_name='nope', teacher_checkpoint_path='/c'),
     '--teacher_model_name=nope is not a network'),
    (dict(distillation_weight=1.5), '--distillation_weight=1.5 is out of range'),
    (dict(distillation_temperature=0.0), '--distillation_temperature=0 is out of range'),
])
def test_mistakes_are_one_line(options, match):
    with pytest.raises(UsageError, match=match) as raised:
        distillation.DistillationConfig(**options)
    assert '\n' not in str(raised.value)


# --- The teacher: restored, frozen. ---

def _trained_like_cifarnet(num_classes=10, seed=0):
    """A cifarnet whose weights are not the fresh ones (so a restore shows)."""
    network = nets_factory.get_network_fn('cifarnet', num_classes)
    network.build(IMAGE_SHAPE)
    rng = np.random.default_rng(seed)
    for variable in network.variables:
        variable.assign(rng.normal(scale=0.05, size=variable.shape).astype(np.float32))
    return network


def _object_checkpoint(network, prefix):
    return tf.train.Checkpoint(**{restore_lib.MODEL_KEY: network}).write(str(prefix))


def _name_based_checkpoint(network, prefix):
    return testing_utils.write_tf1_checkpoint(
        prefix, {slim_name(v): v.numpy() for v in network.variables})


def _teacher(path, model_name='cifarnet', num_classes=10, strategy=None, **options):
    return distillation.build_teacher(
        distillation.DistillationConfig(model_name, str(path), **options),
        num_classes=num_classes, image_shape=IMAGE_SHAPE,
        strategy=strategy or tf.distribute.get_strategy())


@pytest.mark.parametrize('write', [_object_checkpoint, _name_based_checkpoint],
                         ids=['object', 'name_based'])
def test_the_teacher_is_restored_and_frozen(tmp_path, write):
    source = _trained_like_cifarnet()
    path = write(source, tmp_path / 'teacher')
    teacher = _teacher(path)
    assert teacher.network.trainable_variables == ()
    for restored, original in zip(teacher.network.variables, source.variables):
        np.testing.assert_array_equal(restored.numpy(), original.numpy())
    images = np.random.default_rng(0).normal(size=(3, *IMAGE_SHAPE)).astype(np.float32)
    soft = teacher.soft_targets(images)
    np.testing.assert_allclose(soft.logits, source(images, training=False)[0],
                               rtol=1e-6, atol=1e-6)
    assert (soft.weight, soft.temperature) == (0.5, 1.0)


def test_a_directory_gives_its_newest_checkpoint(tmp_path):
    source = _trained_like_cifarnet()
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=source),
                                         str(tmp_path), max_to_keep=2)
    manager.save()
    teacher = _teacher(tmp_path)
    np.testing.assert_array_equal(teacher.network.variables[0].numpy(),
                                  source.variables[0].numpy())


@pytest.mark.parametrize('case, match', [
    ('classes', r'holds a teacher for 5 classes; the student trains 10'),
    ('network', r'does not fit --teacher_model_name=cifarnet .*pass the '
                r'--teacher_model_name that checkpoint was trained as'),
    ('absent', r'--teacher_checkpoint_path=\S+: Checkpoint \S+ does not exist'),
])
def test_a_checkpoint_that_does_not_fit_is_one_line(tmp_path, case, match):
    if case == 'classes':
        path = _name_based_checkpoint(_trained_like_cifarnet(num_classes=5),
                                      tmp_path / 'five')
    elif case == 'network':
        lenet = nets_factory.get_network_fn('lenet', 10)
        lenet.build(IMAGE_SHAPE)
        path = _name_based_checkpoint(lenet, tmp_path / 'lenet')
    else:
        path = tmp_path / 'absent'
    with pytest.raises(UsageError, match=match) as raised:
        _teacher(path)
    assert '\n' not in str(raised.value)


def test_a_batch_norm_teacher_restores_on_two_clones(tmp_path):
    """mobilenet_v1_025 (batch norm: moving statistics one copy per replica): every
    replica's copy takes the checkpoint's value, and the replicas' logits are the
    single device's."""
    source = nets_factory.get_network_fn('mobilenet_v1_025', 10)
    source.build(IMAGE_SHAPE)
    values = {slim_name(v): testing_utils.golden_weight_value(slim_name(v), v.shape)
              for v in source.variables}
    path = testing_utils.write_tf1_checkpoint(tmp_path / 'mobilenet', values)
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
    teacher = _teacher(path, 'mobilenet_v1_025', strategy=strategy)
    assert teacher.network.trainable_variables == ()
    for variable in teacher.network.variables:
        for copy in strategy.experimental_local_results(variable):
            np.testing.assert_array_equal(copy.numpy(), values[slim_name(variable)])
    images = np.random.default_rng(0).normal(size=(2, *IMAGE_SHAPE)).astype(np.float32)
    per_replica = strategy.run(tf.function(lambda x: teacher.soft_targets(x).logits),
                               args=(tf.constant(images),))
    alone = _teacher(path, 'mobilenet_v1_025').soft_targets(images).logits
    for logits in strategy.experimental_local_results(per_replica):
        np.testing.assert_allclose(logits, alone, rtol=1e-5, atol=1e-5)


# --- Training with a teacher. ---

def _fixed_batch_input_fn(images, labels, batch_size):
    """The same batch every time: replicas and micro-batches all see it."""
    def input_fn(input_context=None):
        del input_context
        return tf.data.Dataset.from_tensors((images[:batch_size],
                                             labels[:batch_size])).repeat()
    return input_fn


def _data(count=8, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (count, *IMAGE_SHAPE)).astype(np.float32),
            rng.integers(0, 10, count).astype(np.int64))


def _trainer(strategy, train_dir, input_fn, *, batch_size=4, micro_batches=1, max_steps=2,
             teacher_path=None, mixing=batch_mixing.MixingConfig()):
    with strategy.scope():
        network = nets_factory.get_network_fn('lenet', 10, weight_decay=0.01,
                                              is_training=True, dropout_keep_prob=1.0)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig('momentum'))
    teacher = (distillation.DistillationConfig('cifarnet', str(teacher_path), 0.7, 2.0)
               if teacher_path else distillation.DistillationConfig())
    return trainer_lib.Trainer(
        strategy=strategy, network=network, optimizer=optimizer,
        learning_rate_fn=lambda step: tf.constant(0.05), input_fn=input_fn,
        image_shape=IMAGE_SHAPE, config=trainer_lib.TrainConfig(
            train_dir=str(train_dir), batch_size=batch_size, max_number_of_steps=max_steps,
            gradient_accumulation_steps=micro_batches, mixing=mixing,
            distillation=teacher, save_interval_secs=0, num_image_summaries=batch_size))


def _values(module):
    return {slim_name(v): v.numpy() for v in module.variables}


def _same_start(trainers):
    for trainer in trainers[1:]:
        for source, target in zip(trainers[0].network.variables, trainer.network.variables):
            target.assign(source)


def test_one_device_clones_and_micro_batches_distil_alike(tmp_path):
    """Two updates on one batch of 4: on one device, on 2 clones (each the batch), and
    as 2 micro-batches (each the batch): the same weights. The teacher's stay as
    restored; the student's checkpoint holds exactly what it holds without a teacher."""
    teacher_path = _object_checkpoint(_trained_like_cifarnet(), tmp_path / 'teacher')
    images, labels = _data()
    input_fn = _fixed_batch_input_fn(images, labels, 4)
    clones = tf.distribute.MirroredStrategy(
        ['/cpu:0', '/cpu:1'], cross_device_ops=tf.distribute.ReductionToOneDevice())
    one = tf.distribute.get_strategy()
    trainers = [_trainer(one, tmp_path / 'one', input_fn, teacher_path=teacher_path),
                _trainer(clones, tmp_path / 'clones', input_fn, teacher_path=teacher_path),
                _trainer(one, tmp_path / 'micro', input_fn, micro_batches=2,
                         teacher_path=teacher_path),
                _trainer(one, tmp_path / 'plain', input_fn)]
    _same_start(trainers)
    teacher_before = _values(trainers[0].model_step.teacher.network)
    results = [trainer.train() for trainer in trainers]
    for metrics in results[:3]:
        assert metrics['distillation'] > 0 and np.isfinite(metrics['total_loss'])
        assert metrics['total_loss'] == pytest.approx(
            metrics['cross_entropy'] + metrics['distillation'] + metrics['regularization'],
            rel=1e-5)
    assert 'distillation' not in results[3]
    reference = _values(trainers[0].network)
    for trainer in trainers[1:3]:
        for name, value in _values(trainer.network).items():
            np.testing.assert_allclose(value, reference[name], rtol=RTOL, atol=ATOL,
                                       err_msg=name)
    assert any(not np.allclose(value, reference[name])
               for name, value in _values(trainers[3].network).items())
    for trainer in trainers[:3]:
        teacher = trainer.model_step.teacher.network
        assert teacher.trainable_variables == ()
        for name, value in _values(teacher).items():
            np.testing.assert_array_equal(value, teacher_before[name], err_msg=name)
        assert len(trainer.model_step.train_variables) == len(
            trainers[3].model_step.train_variables)
    # The checkpoint: the student's keys only, which evaluation restores as before.
    keys = [set(tf.train.load_checkpoint(str(tmp_path / name)).get_variable_to_shape_map())
            for name in ('one', 'clones', 'micro', 'plain')]
    assert keys[0] == keys[1] == keys[3]
    evaluated = nets_factory.get_network_fn('lenet', 10)
    evaluated.build(IMAGE_SHAPE)
    plan = restore_lib.plan_restore(evaluated, str(tmp_path / 'one'))
    assert not plan.missing and not plan.checkpoint_only and not plan.mismatched
    restore_lib.restore_network(evaluated, str(tmp_path / 'one'))
    for name, value in _values(evaluated).items():
        np.testing.assert_array_equal(value, reference[name], err_msg=name)


def test_the_teacher_sees_the_mixed_batch(tmp_path):
    teacher_path = _name_based_checkpoint(_trained_like_cifarnet(), tmp_path / 'teacher')
    images, labels = _data()
    trainer = _trainer(tf.distribute.get_strategy(), tmp_path / 'train',
                       _fixed_batch_input_fn(images, labels, 8), batch_size=8,
                       teacher_path=teacher_path,
                       mixing=batch_mixing.MixingConfig(mixup_alpha=1.0))
    step = trainer.model_step
    seen = []
    soft_targets = step.teacher.soft_targets
    step.teacher.soft_targets = lambda batch: seen.append(batch) or soft_targets(batch)
    _, metrics, first_images = step._gradients(  # pylint: disable=protected-access
        tf.constant(images), tf.constant(labels), tf.constant(0, tf.int64), capture=False,
        factor_weights=False)
    np.testing.assert_array_equal(seen[0], first_images)  # the mixed images
    assert not np.allclose(seen[0], images)
    assert metrics['distillation'] > 0


def test_mixing_and_accumulation_on_two_clones_train(tmp_path):
    teacher_path = _name_based_checkpoint(_trained_like_cifarnet(), tmp_path / 'teacher')
    images, labels = _data(16)
    strategy = tf.distribute.MirroredStrategy(
        ['/cpu:0', '/cpu:1'], cross_device_ops=tf.distribute.ReductionToOneDevice())

    def input_fn(input_context=None):
        del input_context
        return tf.data.Dataset.from_tensor_slices((images, labels)).batch(4).repeat()

    metrics = _trainer(strategy, tmp_path / 'train', input_fn, micro_batches=2,
                       max_steps=2, teacher_path=teacher_path,
                       mixing=batch_mixing.MixingConfig(mixup_alpha=0.4,
                                                        cutmix_alpha=1.0)).train()
    assert np.isfinite(metrics['total_loss']) and metrics['distillation'] > 0


# --- Through the scripts: a student with and without a teacher (slow). ---

def _scalars(train_dir, tag):
    values = []
    for event_file in sorted(tf.io.gfile.glob(str(train_dir / 'events.out.tfevents.*'))):
        for record in tf.data.TFRecordDataset(event_file):
            event = tf.compat.v1.Event.FromString(record.numpy())
            values += [(event.step, float(tf.make_ndarray(value.tensor)))
                       for value in event.summary.value if value.tag == tag]
    return [value for _, value in sorted(values)]


def _accuracy(train_dir, eval_dir, model_name, shapes_dir):
    result = run_script(EVAL, '--dataset_name=shapes', f'--dataset_dir={shapes_dir}',
                        '--dataset_split_name=validation', f'--model_name={model_name}',
                        '--preprocessing_name=cifarnet', '--eval_image_size=32',
                        f'--checkpoint_path={train_dir}', f'--eval_dir={eval_dir}',
                        '--batch_size=500')
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((eval_dir / 'metrics.json').read_text())['Accuracy']


TEACHER_STEPS, STUDENT_STEPS, SEED = 300, 150, 3


@pytest.mark.slow
def test_a_student_with_a_teacher_against_one_without(tmp_path, shapes_dir):
    """cifarnet (the teacher) trained on shapes, then lenet for the same steps and seed,
    with and without it; both evaluated on the validation split. Asserted only what
    holds for any seed; the accuracies are printed (pytest -s) for the record."""
    common = ['--dataset_name=shapes', f'--dataset_dir={shapes_dir}', '--optimizer=adam',
              '--opt_epsilon=1e-8', '--learning_rate=0.001',
              '--learning_rate_decay_type=fixed', '--save_summaries_secs=0',
              '--preprocessing_name=cifarnet', '--train_image_size=32']
    teacher_dir = tmp_path / 'teacher'
    taught = run_script(TRAIN, *common, '--model_name=cifarnet', '--batch_size=64',
                        f'--max_number_of_steps={TEACHER_STEPS}', '--seed=1',
                        '--weight_decay=0.0004', f'--train_dir={teacher_dir}', timeout=900)
    assert taught.returncode == 0, taught.stderr[-3000:]
    student = [*common, '--model_name=lenet', '--batch_size=32', f'--seed={SEED}',
               '--deterministic', f'--max_number_of_steps={STUDENT_STEPS}',
               '--log_every_n_steps=25']
    runs = {}
    for name, extra in [('without', []),
                        ('with', ['--teacher_model_name=cifarnet',
                                  f'--teacher_checkpoint_path={teacher_dir}',
                                  '--distillation_weight=0.5',
                                  '--distillation_temperature=4'])]:
        result = run_script(TRAIN, *student, *extra, f'--train_dir={tmp_path / name}',
                            timeout=900)
        assert result.returncode == 0, result.stderr[-3000:]
        runs[name] = result
    assert ('distillation: teacher cifarnet from ' in runs['with'].stderr
            and 'distillation:' not in runs['without'].stderr)
    soft = _scalars(tmp_path / 'with', 'losses/distillation')
    assert len(soft) >= 2 and soft[-1] < soft[0], soft
    assert not _scalars(tmp_path / 'without', 'losses/distillation')
    readers = [tf.train.load_checkpoint(str(tmp_path / name))
               for name in ('with', 'without')]
    assert set(readers[0].get_variable_to_shape_map()) == set(
        readers[1].get_variable_to_shape_map())
    key = next(k for k in readers[0].get_variable_to_shape_map()
               if k.startswith('model/') and k.endswith('VARIABLE_VALUE'))
    assert not np.allclose(readers[0].get_tensor(key), readers[1].get_tensor(key))
    accuracies = {'teacher (cifarnet)': _accuracy(teacher_dir, tmp_path / 'eval_teacher',
                                                  'cifarnet', shapes_dir)}
    for name in ('without', 'with'):
        accuracies[f'lenet {name} teacher'] = _accuracy(
            tmp_path / name, tmp_path / f'eval_{name}', 'lenet', shapes_dir)
    print(f'\nshapes validation accuracy (teacher {TEACHER_STEPS} steps, students '
          f'{STUDENT_STEPS} steps, seed {SEED}): {accuracies}')
    assert all(0.0 <= value <= 1.0 for value in accuracies.values())
