"""vgg_preprocessing: aspect-preserving resize, crop, flip, ImageNet mean subtraction."""
import numpy as np
import pytest
import tensorflow as tf

from preprocessing import vgg_preprocessing

MEANS = np.array([123.68, 116.78, 103.94], np.float32)
SEEDS = range(20)


def _ramp(height=300, width=400):
    """Gray image brightening left to right by 255 / (width - 1) per pixel."""
    row = np.linspace(0, 255, width).round().astype(np.uint8)
    return np.repeat(np.tile(row[None, :, None], (height, 1, 1)), 3, axis=2)


def _train(image, seed, **kwargs):
    tf.random.set_seed(seed)
    return vgg_preprocessing.preprocess_image(
        tf.constant(image), 224, 224, is_training=True, **kwargs).numpy()


@pytest.mark.parametrize("height,width,side,expected", [
    (300, 400, 256, (256, 341)),
    (400, 300, 256, (341, 256)),
    (300, 400, 512, (512, 683)),
    (100, 100, 300, (300, 300)),
])
def test_smallest_side_resize_shape(height, width, side, expected):
    new_height, new_width = vgg_preprocessing._smallest_size_at_least(height, width, side)
    assert (int(new_height), int(new_width)) == expected


def test_train_scale_is_sampled_from_256_to_512_and_flips():
    # Ramp slope per output pixel: 255/399 * 300/side, from 0.75 (256) to 0.37 (512).
    slopes = []
    for seed in SEEDS:
        output = _train(_ramp(), seed)
        row = output[..., 0].mean(axis=0)
        slopes.append(np.polyfit(np.arange(224), row, 1)[0])
    magnitudes = np.abs(slopes)
    full_scale = 255 / 399 * 300
    assert magnitudes.min() >= full_scale / 512 - 0.01
    assert magnitudes.max() <= full_scale / 256 + 0.01
    assert magnitudes.max() - magnitudes.min() > 0.05
    flipped = [slope < 0 for slope in slopes]
    assert any(flipped) and not all(flipped)


def test_train_subtracts_means_and_is_reproducible():
    image = np.full((300, 400, 3), 200, np.uint8)
    output = _train(image, 0)
    assert output.shape == (224, 224, 3) and output.dtype == np.float32
    np.testing.assert_allclose(output, np.broadcast_to(200 - MEANS, output.shape), atol=1e-4)
    ramp = _ramp()
    np.testing.assert_array_equal(_train(ramp, 3), _train(ramp, 3))


def test_eval_crop_offsets_truncate():
    # 256x257 resized with side 256 stays 256x257; a 255 crop starts at row 0, column 1.
    image = np.arange(256 * 257 * 3).reshape(256, 257, 3) % 251
    output = vgg_preprocessing.preprocess_image(tf.constant(image.astype(np.uint8)), 255, 255)
    np.testing.assert_allclose(output.numpy(), image[0:255, 1:256] - MEANS, atol=1e-4)


def test_eval_fails_when_crop_is_larger_than_resized_image():
    with pytest.raises(tf.errors.InvalidArgumentError, match="Crop size"):
        vgg_preprocessing.preprocess_image(tf.zeros([300, 400, 3], tf.uint8), 300, 300)


def test_grayscale_subtracts_gray_mean():
    image = np.full((300, 400, 3), 200, np.uint8)
    output = vgg_preprocessing.preprocess_image(tf.constant(image), 224, 224, use_grayscale=True)
    gray_mean = float(tf.image.rgb_to_grayscale(tf.constant(MEANS)[None, None])[0, 0, 0])
    gray_value = float(tf.image.rgb_to_grayscale(tf.constant([[[200.0] * 3]]))[0, 0, 0])
    assert output.shape == (224, 224, 1)
    np.testing.assert_allclose(output.numpy(), gray_value - gray_mean, atol=1e-3)


def test_one_channel_input_is_treated_as_rgb():
    gray = np.full((300, 400, 1), 200, np.uint8)
    output = vgg_preprocessing.preprocess_image(tf.constant(gray), 224, 224).numpy()
    np.testing.assert_allclose(output, np.broadcast_to(200 - MEANS, output.shape), atol=1e-4)
