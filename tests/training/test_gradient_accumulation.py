"""Gradient accumulation (training.recipes.gradient_accumulation): K micro-batches make the update
one batch of K times the size makes, on one device and on 2 CPU clones; steps and the
learning rate count updates; resume stays exact; sync replicas are refused.

lenet (no batch norm), dropout off, L2 weight decay on (it must count once per update),
momentum (an update applied twice would show). Tolerance: 1e-5 relative (float32 sums
in another order).
"""
import numpy as np
import pytest
import tensorflow as tf

from cli import train_job
from core import seeding
from core.errors import UsageError
from deployment import cluster, model_deploy
from nets import nets_factory
from training.recipes import batch_mixing
from training.recipes import learning_rate as lr_config
from training.recipes import optimizers
from training.loop import trainer as trainer_lib

RTOL, ATOL = 1e-5, 1e-7


def _data(count, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (count, 28, 28, 1)).astype(np.float32),
            rng.integers(0, 10, count).astype(np.int64))


def _input_fn(images, labels, batch_size):
    def input_fn(input_context=None):
        del input_context
        return tf.data.Dataset.from_tensor_slices((images, labels)).batch(
            batch_size, drop_remainder=True).repeat()
    return input_fn


def _trainer(strategy, train_dir, input_fn, *, batch_size, micro_batches=1, max_steps=1,
             decay='fixed', mixing=batch_mixing.MixingConfig(), dropout_keep_prob=1.0):
    with strategy.scope():
        network = nets_factory.get_network_fn('lenet', 10, weight_decay=0.01,
                                              is_training=True,
                                              dropout_keep_prob=dropout_keep_prob)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig('momentum'))
    learning_rate_fn = lr_config.create_learning_rate_fn(
        lr_config.LearningRateConfig(decay, learning_rate=0.05,
                                     learning_rate_decay_factor=0.5,
                                     num_epochs_per_decay=1.0),
        batch_size * micro_batches, batch_size, batches_per_update=micro_batches)
    return trainer_lib.Trainer(
        strategy=strategy, network=network, optimizer=optimizer,
        learning_rate_fn=learning_rate_fn, input_fn=input_fn, image_shape=(28, 28, 1),
        config=trainer_lib.TrainConfig(
            train_dir=str(train_dir), batch_size=batch_size, max_number_of_steps=max_steps,
            gradient_accumulation_steps=micro_batches, mixing=mixing,
            save_interval_secs=0))


def _values(network):
    return {v.name: v.numpy() for v in network.variables}


def _same_start(trainers):
    for trainer in trainers[1:]:
        for source, target in zip(trainers[0].network.variables, trainer.network.variables):
            target.assign(source)


def _assert_same_update(strategy, tmp_path, examples):
    images, labels = _data(examples)
    replicas = strategy.num_replicas_in_sync
    whole = _trainer(strategy, tmp_path / 'whole', _input_fn(images, labels, 32),
                     batch_size=32)
    accumulated = _trainer(strategy, tmp_path / 'micro', _input_fn(images, labels, 8),
                           batch_size=8, micro_batches=4)
    _same_start([whole, accumulated])
    before = _values(whole.network)
    whole.train()
    accumulated.train()
    after_whole, after_accumulated = _values(whole.network), _values(accumulated.network)
    assert all(not np.allclose(before[k], after_whole[k]) for k in before)
    assert replicas * 32 == examples  # every replica's 4 micro-batches: one batch of 32
    for name in after_whole:
        np.testing.assert_allclose(after_accumulated[name], after_whole[name], rtol=RTOL,
                                   atol=ATOL, err_msg=name)
    assert int(accumulated.global_step.numpy()) == 1


def test_four_micro_batches_of_8_update_as_one_batch_of_32(tmp_path):
    _assert_same_update(tf.distribute.get_strategy(), tmp_path, 32)


def test_four_micro_batches_of_8_update_as_one_batch_of_32_on_two_clones(tmp_path):
    strategy = tf.distribute.MirroredStrategy(
        ['/cpu:0', '/cpu:1'], cross_device_ops=tf.distribute.ReductionToOneDevice())
    _assert_same_update(strategy, tmp_path, 64)


def test_steps_and_learning_rate_count_updates(tmp_path):
    """3 updates of 2 micro-batches: global step 3, 6 batches read, and the rate
    (halved every update: an epoch is one update here) is the third update's."""
    images, labels = _data(64)
    labels = np.arange(64) % 10  # batch b starts with label 4 * b % 10
    trainer = _trainer(tf.distribute.get_strategy(), tmp_path,
                       _input_fn(images, labels, 4), batch_size=4, micro_batches=2,
                       max_steps=3, decay='exponential')
    metrics = trainer.train()
    assert int(trainer.global_step.numpy()) == 3
    assert metrics['learning_rate'] == pytest.approx(0.05 * 0.5 ** 2)
    next_images, next_labels = next(trainer.steps.runner.checkpointable_iterator())
    assert next_images.shape == (2, 4, 28, 28, 1)
    np.testing.assert_array_equal(next_labels[:, 0], [4 * 6 % 10, 4 * 7 % 10])


def test_a_resumed_run_ends_as_an_uninterrupted_one(tmp_path):
    """With mixup and cutmix drawn from the checkpointed generator, and the input
    position saved between updates."""
    images, labels = _data(40)
    input_fn = _input_fn(images, labels, 4)
    strategy = tf.distribute.get_strategy()
    options = dict(batch_size=4, micro_batches=2, dropout_keep_prob=0.5,
                   mixing=batch_mixing.MixingConfig(mixup_alpha=0.2, cutmix_alpha=1.0))
    seeding.seed_everything(1)
    straight = _trainer(strategy, tmp_path / 'straight', input_fn, max_steps=4, **options)
    straight.train()
    seeding.seed_everything(1)
    _trainer(strategy, tmp_path / 'resumed', input_fn, max_steps=2, **options).train()
    seeding.seed_everything(2)  # the resumed run takes everything from the checkpoint
    resumed = _trainer(strategy, tmp_path / 'resumed', input_fn, max_steps=4, **options)
    resumed.train()
    for name, value in _values(straight.network).items():
        np.testing.assert_array_equal(_values(resumed.network)[name], value, err_msg=name)


def test_mixing_on_two_clones_repeats_with_the_seed(tmp_path):
    """Each clone mixes its own micro-batches from the generator; the same seed, the
    same weights."""
    images, labels = _data(32)
    strategy = tf.distribute.MirroredStrategy(
        ['/cpu:0', '/cpu:1'], cross_device_ops=tf.distribute.ReductionToOneDevice())

    def run(name, mixing):
        seeding.seed_everything(5)
        trainer = _trainer(strategy, tmp_path / name, _input_fn(images, labels, 4),
                           batch_size=4, micro_batches=2, max_steps=1, mixing=mixing)
        metrics = trainer.train()
        assert np.isfinite(metrics['total_loss'])
        return _values(trainer.network)

    mixing = batch_mixing.MixingConfig(mixup_alpha=0.4, cutmix_alpha=1.0)
    first, again = run('first', mixing), run('again', mixing)
    unmixed = run('unmixed', batch_mixing.MixingConfig())
    for name, value in first.items():
        np.testing.assert_array_equal(again[name], value, err_msg=name)
    assert any(not np.allclose(unmixed[name], value) for name, value in first.items())


def test_mixed_float16_scales_and_skips_once_per_update(tmp_path):
    """The loss scale moves per update; the update matches one on the whole batch
    within float16's sums in another order (5e-2 of the update's norm, measured 2e-2;
    a scale left in, or K micro-batches summed unaveraged, would be off by 2x or more)."""
    images, labels = _data(8)

    def float16_trainer(name, batch_size, micro_batches, max_steps=2, scale=64.0):
        with tf.distribute.get_strategy().scope():
            network = nets_factory.get_network_fn('lenet', 10, is_training=True,
                                                  dropout_keep_prob=1.0)
            optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig('sgd'))
        trainer = trainer_lib.Trainer(
            strategy=tf.distribute.get_strategy(), network=network, optimizer=optimizer,
            learning_rate_fn=lambda step: tf.constant(0.01),
            input_fn=_input_fn(images, labels, batch_size), image_shape=(28, 28, 1),
            config=trainer_lib.TrainConfig(
                train_dir=str(tmp_path / name), batch_size=batch_size,
                max_number_of_steps=max_steps, precision='mixed_float16',
                gradient_accumulation_steps=micro_batches))
        trainer.loss_scale.scale.assign(scale)  # 64: small enough not to overflow here
        return trainer

    whole, accumulated = float16_trainer('whole', 8, 1), float16_trainer('micro', 4, 2)
    _same_start([whole, accumulated])
    start = _values(whole.network)
    whole.train()
    accumulated.train()
    assert int(accumulated.loss_scale.good_steps.numpy()) == 2  # per update, not batch
    for name, value in _values(whole.network).items():
        whole_update = value - start[name]
        accumulated_update = _values(accumulated.network)[name] - start[name]
        assert (np.linalg.norm(accumulated_update - whole_update)
                <= 5e-2 * np.linalg.norm(whole_update)), name
    # Micro-batches that overflow skip their one update and halve the scale once.
    overflowing = float16_trainer('overflow', 4, 2, max_steps=1, scale=2.0 ** 60)
    before = _values(overflowing.network)
    overflowing.train()
    assert float(overflowing.loss_scale.scale.numpy()) == 2.0 ** 59
    assert int(overflowing.global_step.numpy()) == 1
    for name, value in before.items():
        np.testing.assert_array_equal(_values(overflowing.network)[name], value)


def test_sync_replicas_with_accumulation_is_refused_in_one_line(tmp_path):
    # A ps task: refused before it would serve, as every task of the cluster is.
    deployment = model_deploy.from_flags(
        sync_replicas=True, replicas_to_aggregate=2,
        cluster=cluster.Cluster(ps=('localhost:100',), workers=('localhost:200',
                                                                 'localhost:201'),
                                task_type='ps', task_index=0, source='a test'))
    config = trainer_lib.TrainConfig(train_dir=str(tmp_path), batch_size=8,
                                    gradient_accumulation_steps=2)
    with pytest.raises(UsageError, match='--gradient_accumulation_steps=2 .*--sync_replicas'
                       ) as raised:
        train_job.train(None, deployment, config, None, None, weight_decay=0.0)
    assert '\n' not in str(raised.value)


def test_accumulation_steps_below_1_are_refused(tmp_path):
    with pytest.raises(UsageError, match='--gradient_accumulation_steps=0'):
        trainer_lib.TrainConfig(train_dir=str(tmp_path), batch_size=8,
                               gradient_accumulation_steps=0)
