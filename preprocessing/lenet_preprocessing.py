"""LeNet (MNIST) preprocessing, as TF-Slim's lenet_preprocessing: no randomness."""
import tensorflow as tf

from preprocessing import image_ops
from preprocessing import registry


def preprocess_image(image, output_height, output_width, is_training=False,
                     use_grayscale=False, seed=None):
    """Centre crop or zero-pad to the output size, then scale to (x - 128) / 128.

    Training and evaluation are identical. Works for any channel count.
    """
    del is_training, seed  # Same path for training and evaluation, as in TF-Slim.
    image = tf.cast(tf.convert_to_tensor(image), tf.float32)
    if use_grayscale:
        image = image_ops.to_grayscale(image)
    image = tf.image.resize_with_crop_or_pad(image, output_height, output_width)
    image = (image - 128.0) / 128.0
    return image_ops.set_output_shape(image, output_height, output_width)


registry.register("lenet")(preprocess_image)
