"""efficientnet_preprocessing and efficientnet_v2_preprocessing: the official releases'
crops, resizes and normalisations."""
import numpy as np
import pytest
import tensorflow as tf

from nets import nets_factory
from preprocessing import efficientnet_preprocessing as effnet
from preprocessing import efficientnet_v2_preprocessing as effnet_v2
from preprocessing import preprocessing_factory

MEAN = np.array([0.485, 0.456, 0.406], np.float32) * 255
STD = np.array([0.229, 0.224, 0.225], np.float32) * 255


def _image(height=300, width=400, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), np.uint8)


def test_eval_crops_the_padded_centre_and_resizes_bicubically():
    image = _image()
    output = effnet.preprocess_image(tf.constant(image), 224, 224).numpy()
    # side int(224 / 256 * 300) = 262, offsets rounded up: (38 + 1) // 2, (138 + 1) // 2.
    crop = image[19:19 + 262, 69:69 + 262].astype(np.float32)
    expected = tf.raw_ops.ResizeBicubic(images=crop[None], size=[224, 224],
                                        align_corners=False, half_pixel_centers=False)[0]
    np.testing.assert_allclose(output, (expected.numpy() - MEAN) / STD, atol=1e-4)


def test_v2_eval_crops_below_320_only_and_resizes_bilinearly():
    image = _image()
    output = effnet_v2.preprocess_image(tf.constant(image), 224, 224).numpy()
    crop = image[19:19 + 262, 69:69 + 262].astype(np.float32)  # offsets rounded down
    expected = tf.image.resize(crop, [224, 224]).numpy()
    np.testing.assert_allclose(output, (expected - 128) / 128, atol=1e-5)
    whole = effnet_v2.preprocess_image(tf.constant(image), 384, 384).numpy()
    expected = tf.image.resize(image.astype(np.float32), [384, 384]).numpy()
    np.testing.assert_allclose(whole, (expected - 128) / 128, atol=1e-5)


@pytest.mark.parametrize('preprocess, normalised', [
    (effnet.preprocess_image, (200 - MEAN) / STD),
    (effnet_v2.preprocess_image, np.full(3, (200 - 128) / 128, np.float32))])
def test_training_output_is_normalised_and_follows_the_seed(preprocess, normalised):
    flat = tf.constant(np.full((120, 160, 3), 200, np.uint8))
    output = preprocess(flat, 64, 64, is_training=True, seed=tf.constant([1, 2])).numpy()
    assert output.shape == (64, 64, 3) and output.dtype == np.float32
    np.testing.assert_allclose(output, np.broadcast_to(normalised, output.shape), atol=1e-4)
    image = tf.constant(_image(120, 160))
    first = preprocess(image, 64, 64, is_training=True, seed=tf.constant([3, 4])).numpy()
    again = preprocess(image, 64, 64, is_training=True, seed=tf.constant([3, 4])).numpy()
    other = preprocess(image, 64, 64, is_training=True, seed=tf.constant([5, 6])).numpy()
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)


@pytest.mark.parametrize('preprocess', [effnet.preprocess_image, effnet_v2.preprocess_image])
def test_training_flips_and_crops(preprocess):
    # A ramp brightening left to right: a flip makes the slope negative; crops change it.
    ramp = np.repeat(np.tile(np.linspace(0, 255, 160)[None, :, None], (120, 1, 1)), 3, 2)
    slopes = []
    for seed in range(12):
        output = preprocess(tf.constant(ramp.astype(np.uint8)), 32, 32, is_training=True,
                            seed=tf.constant([seed, 0])).numpy()
        slopes.append(np.polyfit(np.arange(32), output[..., 0].mean(0), 1)[0])
    assert any(s < 0 for s in slopes) and any(s > 0 for s in slopes)
    assert np.ptp(np.abs(slopes)) > 0.01


def test_augment_sees_the_uint8_image_after_crop_and_flip():
    seen = []

    def augment(pixels):
        seen.append(pixels)
        return 255 - pixels

    flat = tf.constant(np.full((50, 50, 3), 100, np.uint8))
    output = effnet_v2.preprocess_image(flat, 32, 32, is_training=True, augment=augment,
                                        seed=tf.constant([1, 2])).numpy()
    assert seen[0].dtype == tf.uint8 and seen[0].shape == (32, 32, 3)
    np.testing.assert_allclose(output, (155 - 128) / 128, atol=1e-6)


def test_grayscale_and_encoded_input():
    image = _image(64, 64)
    encoded = tf.io.encode_png(image)
    gray = effnet.preprocess_image(encoded, 32, 32, use_grayscale=True).numpy()
    assert gray.shape == (32, 32, 1)


@pytest.mark.parametrize('name, family', [
    ('efficientnet_b0', 'efficientnet'), ('efficientnet_b7', 'efficientnet'),
    ('efficientnet_v2_b0', 'efficientnet'), ('efficientnet_v2_b3', 'efficientnet'),
    ('efficientnet_v2_s', 'efficientnet_v2'), ('efficientnet_v2_l', 'efficientnet_v2')])
def test_each_net_names_its_release_family(name, family):
    assert nets_factory.get_spec(name).preprocessing_name == family
    fn = preprocessing_factory.get_preprocessing(family)
    assert fn(tf.constant(_image(40, 40)), 24, 24).shape == (24, 24, 3)
