"""inception_preprocessing: box crop, resize, flip and colour jitter; outputs in [-1, 1]."""
import numpy as np
import pytest
import tensorflow as tf

from preprocessing import image_ops, inception_preprocessing, random_draws

SEEDS = range(20)


def _ramp(height=120, width=160):
    """Gray image brightening left to right: flips and crops stay visible after jitter."""
    row = np.linspace(0, 255, width).round().astype(np.uint8)
    return np.repeat(np.tile(row[None, :, None], (height, 1, 1)), 3, axis=2)


def _train(image, seed, size=64, **kwargs):
    tf.random.set_seed(seed)
    return inception_preprocessing.preprocess_image(
        tf.constant(image), size, size, is_training=True, **kwargs).numpy()


@pytest.mark.parametrize("fast_mode", [True, False])
def test_train_output_in_range(fast_mode, test_data_dir):
    path = str(test_data_dir / "preprocessing" / "image_0.png")
    image = tf.io.decode_png(tf.io.read_file(path)).numpy()
    for seed in range(3):
        output = _train(image, seed, size=299, fast_mode=fast_mode)
        assert output.shape == (299, 299, 3) and output.dtype == np.float32
        assert output.min() >= -1.0 and output.max() <= 1.0
        assert output.std() > 0.1


def test_train_flips_left_right_across_seeds():
    flipped = []
    for seed in SEEDS:
        output = _train(_ramp(), seed)
        flipped.append(output[:, :16].mean() > output[:, -16:].mean())
    assert any(flipped) and not all(flipped)


def test_train_crop_covers_varying_parts_of_the_image():
    # Without a crop the ramp spans about 2 (from -1 to 1); a box crop spans less.
    spans = []
    for seed in SEEDS:
        row = _train(_ramp(), seed).mean(axis=(0, 2))
        spans.append(row.max() - row.min())
    assert max(spans) > 1.2
    assert min(spans) < 0.8 * max(spans)


def test_train_without_crop_keeps_the_whole_ramp():
    spans = []
    for seed in range(5):
        row = _train(_ramp(), seed, crop_image=False).mean(axis=(0, 2))
        spans.append(row.max() - row.min())
    assert min(spans) > 1.5


def test_train_is_reproducible_per_seed():
    image = _ramp()
    np.testing.assert_array_equal(_train(image, 5), _train(image, 5))
    assert not np.array_equal(_train(image, 5), _train(image, 6))


def test_eval_without_crop_is_a_plain_resize():
    image = _ramp(64, 64)
    output = inception_preprocessing.preprocess_image(
        tf.constant(image), 64, 64, crop_image=False).numpy()
    np.testing.assert_allclose(output, image / 255.0 * 2.0 - 1.0, atol=1e-6)


@pytest.mark.parametrize("is_training", [False, True])
def test_one_channel_input_is_treated_as_rgb(is_training):
    gray = _ramp()[:, :, :1]
    output = inception_preprocessing.preprocess_image(
        tf.constant(gray), 64, 64, is_training=is_training).numpy()
    assert output.shape == (64, 64, 3)
    np.testing.assert_allclose(output[..., 0], output[..., 2], atol=1e-5)


def test_distort_color_rejects_unknown_ordering():
    with pytest.raises(ValueError, match="color_ordering"):
        inception_preprocessing.distort_color(tf.zeros([4, 4, 3]), 2, fast_mode=True)


@pytest.mark.parametrize("low, high", [(0.0, 1.0), (-0.3, 1.3), (-1.0, 0.05)])
def test_closed_form_saturation_matches_tensorflow_kernel(low, high):
    image = tf.constant(np.random.default_rng(0).uniform(low, high, (32, 32, 3)),
                        tf.float32)
    grey = tf.fill([4, 4, 3], 0.4)
    for factor in (0.0, 0.5, 1.0, 1.37, 3.0):
        np.testing.assert_allclose(image_ops.adjust_saturation(image, factor),
                                   tf.image.adjust_saturation(image, factor), atol=1e-6)
        np.testing.assert_allclose(image_ops.adjust_saturation(grey, factor), grey)


def test_fused_fast_mode_jitter_equals_the_ops_one_by_one():
    """The XLA-fused flip + colour jitter makes the draws and output of
    stateless_random_flip_left_right then distort_color in the drawn order."""
    image = tf.constant(np.random.default_rng(1).uniform(0, 1, (24, 24, 3)), tf.float32)
    cases = set()
    for seed in range(24):
        _, _, flip_seed, ordering_seed, color_seed = random_draws.split(
            tf.constant([seed, 5]), 5)
        expected = tf.image.stateless_random_flip_left_right(image, flip_seed)
        expected = random_draws.choice(
            ordering_seed, 2, lambda ordering: lambda: inception_preprocessing.distort_color(
                expected, ordering, True, color_seed))
        draws = inception_preprocessing._fast_mode_draws(flip_seed, ordering_seed,
                                                         color_seed)
        fused = inception_preprocessing._fast_mode_jitter(image, *draws)
        np.testing.assert_allclose(fused, (expected - 0.5) * 2.0, atol=2e-6)
        cases.add((bool(draws[0]), bool(draws[3])))
    assert len(cases) == 4  # both flips, both orders
