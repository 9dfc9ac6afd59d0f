"""Learning-rate schedules against values worked out by hand from slim's formulas."""
import numpy as np
import pytest
import tensorflow as tf

from core.errors import UsageError
from training.recipes.learning_rate import (
    DECAY_TYPES, LearningRateConfig, create_learning_rate_fn)

# 1000 samples, batch 10: 100 steps per epoch; 2 epochs per decay: decay every 200 steps.
SAMPLES, BATCH = 1000, 10


def rates_at(learning_rate_fn, steps):
    return [float(learning_rate_fn(tf.constant(step, tf.int64))) for step in steps]


def test_defaults_match_slim():
    config = LearningRateConfig()
    assert config.learning_rate_decay_type == 'exponential'
    assert config.learning_rate == 0.01
    assert config.end_learning_rate == 0.0001
    assert config.learning_rate_decay_factor == 0.94
    assert config.num_epochs_per_decay == 2.0
    assert config.warmup_epochs == 0.0


def test_fixed():
    fn = create_learning_rate_fn(
        LearningRateConfig(learning_rate_decay_type='fixed', learning_rate=0.03), SAMPLES, BATCH)
    np.testing.assert_allclose(rates_at(fn, [0, 1, 199, 200, 10_000]), [0.03] * 5, rtol=1e-6)


def test_exponential_is_a_staircase():
    fn = create_learning_rate_fn(
        LearningRateConfig(learning_rate=0.1, learning_rate_decay_factor=0.5), SAMPLES, BATCH)
    assert fn.decay_steps == 200
    np.testing.assert_allclose(
        rates_at(fn, [0, 199, 200, 399, 400, 1000]),
        [0.1, 0.1, 0.05, 0.05, 0.025, 0.1 * 0.5**5], rtol=1e-6)


def test_exponential_with_slim_defaults():
    # Slim's defaults on a CIFAR-10-sized split: 50000 / 32 * 2 = 3125 steps per decay.
    fn = create_learning_rate_fn(LearningRateConfig(), 50_000, 32)
    assert fn.decay_steps == 3125
    np.testing.assert_allclose(
        rates_at(fn, [3124, 3125, 9375]), [0.01, 0.0094, 0.01 * 0.94**3], rtol=1e-6)


def test_polynomial_decays_linearly_then_holds():
    fn = create_learning_rate_fn(
        LearningRateConfig(learning_rate_decay_type='polynomial', learning_rate=0.1,
                           end_learning_rate=0.01), SAMPLES, BATCH)
    # (0.1 - 0.01) * (1 - step / 200) + 0.01, and 0.01 from step 200 on (cycle=False).
    np.testing.assert_allclose(
        rates_at(fn, [0, 50, 100, 150, 200, 500]),
        [0.1, 0.0775, 0.055, 0.0325, 0.01, 0.01], rtol=1e-6)


def test_warmup_ramps_linearly_from_zero():
    # 0.5 epochs = 50 steps of warmup, then the (not yet decayed) rate.
    fn = create_learning_rate_fn(
        LearningRateConfig(learning_rate=0.1, warmup_epochs=0.5), SAMPLES, BATCH)
    np.testing.assert_allclose(
        rates_at(fn, [0, 10, 25, 50, 60, 199, 200]),
        [0.0, 0.02, 0.05, 0.1, 0.1, 0.1, 0.1 * 0.94], rtol=1e-6, atol=1e-9)


def test_warmup_is_the_minimum_with_the_decayed_rate():
    # Slim takes min(warmup ramp, decayed rate), it does not switch at the end of warmup:
    # decay every 20 steps (0.2 epochs) by 0.5, warmup over 50 steps.
    fn = create_learning_rate_fn(
        LearningRateConfig(learning_rate=0.1, learning_rate_decay_factor=0.5,
                           num_epochs_per_decay=0.2, warmup_epochs=0.5), SAMPLES, BATCH)
    # step 10: ramp 0.02 < 0.1; step 30: ramp 0.06 > decayed 0.05; step 45: ramp 0.09 > 0.025.
    np.testing.assert_allclose(
        rates_at(fn, [10, 19, 30, 45]), [0.02, 0.038, 0.05, 0.025], rtol=1e-6)


def test_warmup_length_is_not_rounded_to_whole_steps():
    # 1000 / 32 = 31.25 steps per epoch; slim divides by 31.25, not int(31.25) = 31.
    fn = create_learning_rate_fn(
        LearningRateConfig(learning_rate_decay_type='fixed', learning_rate=0.1,
                           warmup_epochs=1.0), SAMPLES, 32)
    np.testing.assert_allclose(
        rates_at(fn, [10, 31, 32]), [0.1 * 10 / 31.25, 0.1 * 31 / 31.25, 0.1], rtol=1e-6)


def test_sync_replicas_divides_steps_per_epoch():
    config = LearningRateConfig(learning_rate=0.1, learning_rate_decay_factor=0.5)
    fn = create_learning_rate_fn(config, SAMPLES, BATCH, batches_per_update=4)
    assert fn.decay_steps == 50  # 200 / 4
    np.testing.assert_allclose(rates_at(fn, [49, 50, 100]), [0.1, 0.05, 0.025], rtol=1e-6)


def test_sync_replicas_rounds_after_dividing():
    # int(1000 / 10 / 3 * 2) = int(66.67) = 66, as in the slim version with warmup.
    fn = create_learning_rate_fn(
        LearningRateConfig(learning_rate=0.1, learning_rate_decay_factor=0.5), SAMPLES,
        BATCH, batches_per_update=3)
    assert fn.decay_steps == 66
    np.testing.assert_allclose(rates_at(fn, [65, 66]), [0.1, 0.05], rtol=1e-6)


def test_sync_replicas_shortens_warmup():
    fn = create_learning_rate_fn(
        LearningRateConfig(learning_rate_decay_type='fixed', learning_rate=0.1,
                           warmup_epochs=1.0), SAMPLES, BATCH, batches_per_update=4)
    # 100 / 4 = 25 steps per epoch.
    np.testing.assert_allclose(rates_at(fn, [5, 25]), [0.02, 0.1], rtol=1e-6)


def test_cosine_over_the_run_after_warmup_ends_at_the_floor():
    # 50 warmup steps (0.5 epochs), then cosine over the remaining 1000 - 50 = 950 steps.
    fn = create_learning_rate_fn(
        LearningRateConfig(learning_rate_decay_type='cosine', learning_rate=0.1,
                           end_learning_rate=0.001, warmup_epochs=0.5), SAMPLES, BATCH,
        max_number_of_steps=1000)
    assert (fn.warmup_steps, fn.decay_steps) == (50, 950)
    at_288 = 0.001 + 0.099 * (1 + np.cos(np.pi * 238 / 950)) / 2
    # Ramp; full rate at the end of warmup; a quarter and half-way (0.001 + 0.099 / 2)
    # into the decay; the floor at the last step and after it.
    np.testing.assert_allclose(
        rates_at(fn, [0, 25, 50, 288, 525, 1000, 5000]),
        [0.0, 0.05, 0.1, at_288, 0.0505, 0.001, 0.001], rtol=1e-5, atol=1e-9)


def test_cosine_without_a_run_length_decays_over_num_epochs_per_decay():
    fn = create_learning_rate_fn(
        LearningRateConfig(learning_rate_decay_type='cosine', learning_rate=0.1,
                           end_learning_rate=0.0), SAMPLES, BATCH)
    assert fn.decay_steps == 200  # 2 epochs of 100 steps
    np.testing.assert_allclose(rates_at(fn, [0, 100, 200, 300]), [0.1, 0.05, 0.0, 0.0],
                               rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize('config, max_steps, flag', [
    (LearningRateConfig(learning_rate_decay_type='cosine', warmup_epochs=20.0), 1000,
     '--warmup_epochs'),
    (LearningRateConfig(learning_rate_decay_type='cosine', learning_rate=0.01,
                        end_learning_rate=0.1), 1000, '--end_learning_rate'),
])
def test_cosine_refuses_what_cannot_decay(config, max_steps, flag):
    with pytest.raises(UsageError, match=flag):
        create_learning_rate_fn(config, SAMPLES, BATCH, max_number_of_steps=max_steps)


def test_works_in_tf_function_with_int64_variable():
    fn = create_learning_rate_fn(
        LearningRateConfig(learning_rate=0.1, learning_rate_decay_factor=0.5,
                           warmup_epochs=0.5), SAMPLES, BATCH)
    global_step = tf.Variable(0, dtype=tf.int64)
    compiled = tf.function(lambda: fn(global_step))
    seen = []
    for step in [0, 25, 200, 400]:
        global_step.assign(step)
        rate = compiled()
        assert rate.dtype == tf.float32 and rate.shape == ()
        seen.append(float(rate))
    np.testing.assert_allclose(seen, [0.0, 0.05, 0.05, 0.025], rtol=1e-6)


def test_unknown_decay_type_lists_valid_names():
    with pytest.raises(UsageError) as error:
        create_learning_rate_fn(
            LearningRateConfig(learning_rate_decay_type='cosine_restarts'), SAMPLES, BATCH)
    message = str(error.value)
    assert "'cosine_restarts'" in message and '--learning_rate_decay_type' in message
    for name in DECAY_TYPES:
        assert name in message


@pytest.mark.parametrize('decay_type', ['exponential', 'polynomial'])
def test_too_few_samples_for_a_decay_step(decay_type):
    # 10 / 32 * 2 = 0.625 steps per decay would divide by zero.
    with pytest.raises(UsageError, match='--num_epochs_per_decay'):
        create_learning_rate_fn(
            LearningRateConfig(learning_rate_decay_type=decay_type), 10, 32)


def test_fixed_rate_needs_no_decay_steps():
    fn = create_learning_rate_fn(LearningRateConfig(learning_rate_decay_type='fixed'), 10, 32)
    np.testing.assert_allclose(rates_at(fn, [0, 5]), [0.01, 0.01], rtol=1e-6)


@pytest.mark.parametrize('config, samples, batch, replicas, flag', [
    (LearningRateConfig(), SAMPLES, 0, 1, '--batch_size'),
    (LearningRateConfig(), 0, BATCH, 1, 'samples'),
    (LearningRateConfig(), SAMPLES, BATCH, 0, '--replicas_to_aggregate'),
    (LearningRateConfig(warmup_epochs=-1.0), SAMPLES, BATCH, 1, '--warmup_epochs'),
])
def test_invalid_inputs(config, samples, batch, replicas, flag):
    with pytest.raises(UsageError, match=flag):
        create_learning_rate_fn(config, samples, batch, batches_per_update=replicas)


# --learning_rate_base_batch_size: the rate given is for that global batch (timm's --lr-base).

@pytest.mark.parametrize('scale, adaptive, expected', [
    ('', False, 0.1 * 1024 / 256),  # linear for SGD-like optimizers
    ('', True, 0.1 * 2.0),  # sqrt(1024 / 256) for the adaptive ones
    ('linear', True, 0.1 * 4.0),
    ('sqrt', False, 0.1 * 2.0),
])
def test_the_rate_scales_to_the_global_batch(scale, adaptive, expected):
    config = LearningRateConfig(learning_rate=0.1, learning_rate_decay_type='fixed',
                                learning_rate_base_batch_size=256,
                                learning_rate_base_scale=scale)
    fn = create_learning_rate_fn(config, SAMPLES, 128, batches_per_update=2,
                                 global_batch_size=1024, adaptive=adaptive)
    np.testing.assert_allclose(rates_at(fn, [0, 7]), [expected] * 2, rtol=1e-6)
    assert fn.scaling == (f'--learning_rate=0.1 for a global batch of 256, x '
                          f'{expected / 0.1:g} ({scale or ("sqrt" if adaptive else "linear")})'
                          " for this run's 1024")


def test_without_a_base_batch_the_rate_is_as_given():
    fn = create_learning_rate_fn(LearningRateConfig(learning_rate_decay_type='fixed'),
                                 SAMPLES, 128, global_batch_size=1024, adaptive=True)
    np.testing.assert_allclose(rates_at(fn, [0]), [0.01], rtol=1e-6)
    assert fn.scaling == ''


def test_an_unknown_base_scale_is_refused():
    with pytest.raises(UsageError, match='--learning_rate_base_scale=cube'):
        LearningRateConfig(learning_rate_base_scale='cube')


def test_a_cosine_floor_above_the_scaled_rate_names_the_scaling():
    config = LearningRateConfig(learning_rate=0.0005, learning_rate_decay_type='cosine',
                                end_learning_rate=0.00001, learning_rate_base_batch_size=512,
                                learning_rate_base_scale='linear')
    with pytest.raises(UsageError, match=r'from the rate 7\.8125e-06 \(--learning_rate=0\.0005 '
                                         r'for a global batch of 512, x 0\.015625 \(linear\)'):
        create_learning_rate_fn(config, SAMPLES, 4, global_batch_size=8)
