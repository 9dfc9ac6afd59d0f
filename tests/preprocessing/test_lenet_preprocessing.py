"""lenet_preprocessing: centre crop or pad, (x - 128) / 128, no randomness."""
import numpy as np
import tensorflow as tf

from preprocessing import lenet_preprocessing


def _image(test_data_dir):
    return tf.io.decode_png(tf.io.read_file(str(test_data_dir / "preprocessing" / "image_0.png")))


def test_training_equals_eval(test_data_dir):
    image = _image(test_data_dir)
    train = lenet_preprocessing.preprocess_image(image, 28, 28, is_training=True)
    evaluation = lenet_preprocessing.preprocess_image(image, 28, 28, is_training=False)
    np.testing.assert_array_equal(train.numpy(), evaluation.numpy())


def test_scales_and_centre_crops(test_data_dir):
    image = _image(test_data_dir)
    output = lenet_preprocessing.preprocess_image(image, 28, 28).numpy()
    # 300x400 -> 28x28 keeps rows 136..163 and columns 186..213.
    expected = (image.numpy()[136:164, 186:214].astype(np.float32) - 128.0) / 128.0
    np.testing.assert_array_equal(output, expected)


def test_mnist_one_channel_is_padded_with_zeros():
    digit = np.full((20, 20, 1), 255, np.uint8)
    output = lenet_preprocessing.preprocess_image(tf.constant(digit), 28, 28).numpy()
    assert output.shape == (28, 28, 1) and output.dtype == np.float32
    # Zero padding becomes -1, the 4-pixel border on every side.
    assert np.all(output[4:24, 4:24] == (255 - 128) / 128)
    border = np.ones((28, 28, 1), bool)
    border[4:24, 4:24] = False
    assert np.all(output[border] == -1.0)


def test_grayscale_uses_rgb_to_grayscale(test_data_dir):
    image = _image(test_data_dir)
    output = lenet_preprocessing.preprocess_image(image, 28, 28, use_grayscale=True)
    gray = tf.image.rgb_to_grayscale(tf.cast(image[136:164, 186:214], tf.float32))
    np.testing.assert_allclose(output.numpy(), (gray.numpy() - 128) / 128, atol=1e-6)


def test_grayscale_of_one_channel_image_is_unchanged():
    digit = tf.constant(np.arange(28 * 28, dtype=np.uint8).reshape(28, 28, 1))
    plain = lenet_preprocessing.preprocess_image(digit, 28, 28)
    gray = lenet_preprocessing.preprocess_image(digit, 28, 28, use_grayscale=True)
    np.testing.assert_array_equal(plain.numpy(), gray.numpy())
