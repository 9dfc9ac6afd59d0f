"""cifarnet_preprocessing: pad 4, random crop, flip, jitter, per-image standardization."""
import numpy as np
import pytest
import tensorflow as tf

from preprocessing import cifarnet_preprocessing

SEEDS = range(20)


def _train(image, seed, **kwargs):
    tf.random.set_seed(seed)
    return cifarnet_preprocessing.preprocess_image(
        tf.constant(image), 32, 32, is_training=True, **kwargs).numpy()


@pytest.fixture
def image(test_data_dir):
    path = str(test_data_dir / "preprocessing" / "image_0.png")
    # A CIFAR-sized crop of the test image.
    return tf.io.decode_png(tf.io.read_file(path)).numpy()[100:132, 200:232]


def test_train_output_is_standardized(image):
    for seed in range(5):
        output = _train(image, seed)
        assert output.shape == (32, 32, 3) and output.dtype == np.float32
        assert abs(output.mean()) < 1e-4
        assert abs(output.std() - 1.0) < 1e-3


def test_train_is_random_but_reproducible_per_seed(image):
    np.testing.assert_array_equal(_train(image, 7), _train(image, 7))
    assert not np.array_equal(_train(image, 7), _train(image, 8))


def test_train_flips_left_right_across_seeds():
    # Bright left half, dark right half: the sign of left minus right shows a flip.
    image = np.zeros((32, 32, 3), np.uint8)
    image[:, :16] = 255
    flipped = []
    for seed in SEEDS:
        output = _train(image, seed)
        flipped.append(output[:, :8].mean() < output[:, -8:].mean())
    assert any(flipped) and not all(flipped)


def _padded_rows_and_columns(output):
    """How many rows and columns of the crop come from the zero padding."""
    if output.max() == output.min():
        return 0, 0
    padding = np.isclose(output, output.min()).all(axis=2)
    return int(padding.all(axis=1).sum()), int(padding.all(axis=0).sum())


def test_train_crop_moves_within_4_pixels_of_padding():
    image = np.full((32, 32, 3), 200, np.uint8)
    crops = {_padded_rows_and_columns(_train(image, seed)) for seed in SEEDS}
    assert len(crops) > 1
    assert all(rows <= 4 and columns <= 4 for rows, columns in crops)


def test_train_without_padding_only_flips(image):
    # Equal channels make contrast a global affine map, which standardization cancels.
    gray = np.repeat(image[..., :1], 3, axis=2)
    standardized = tf.image.per_image_standardization(tf.cast(gray, tf.float32)).numpy()
    orientations = set()
    for seed in range(10):
        output = _train(gray, seed, padding=0)
        matches = [np.allclose(output, candidate, atol=1e-4)
                   for candidate in (standardized, standardized[:, ::-1])]
        assert any(matches)
        orientations.add(matches.index(True))
    assert orientations == {0, 1}


def test_eval_pads_small_images_with_centred_zeros():
    image = np.full((24, 24, 3), 100, np.uint8)
    output = cifarnet_preprocessing.preprocess_image(tf.constant(image), 32, 32).numpy()
    assert _padded_rows_and_columns(output) == (8, 8)
    assert np.all(output[:4] == output.min()) and np.all(output[-4:] == output.min())
    assert np.all(output[4:28, 4:28] == output.max())


def test_eval_is_deterministic(image):
    first = cifarnet_preprocessing.preprocess_image(tf.constant(image), 32, 32)
    second = cifarnet_preprocessing.preprocess_image(tf.constant(image), 32, 32)
    np.testing.assert_array_equal(first.numpy(), second.numpy())


@pytest.mark.parametrize("is_training", [False, True])
def test_mnist_one_channel(is_training):
    digit = np.random.default_rng(0).integers(0, 256, (28, 28, 1), dtype=np.uint8)
    for use_grayscale in (False, True):
        output = cifarnet_preprocessing.preprocess_image(
            tf.constant(digit), 32, 32, is_training=is_training,
            use_grayscale=use_grayscale).numpy()
        assert output.shape == (32, 32, 1)
        assert abs(output.mean()) < 1e-4 and abs(output.std() - 1.0) < 1e-3
