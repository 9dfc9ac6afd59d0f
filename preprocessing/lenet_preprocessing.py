"""LeNet (MNIST) preprocessing, as TF-Slim's lenet_preprocessing: no randomness."""
import tensorflow as tf

from preprocessing import image_ops
from preprocessing import registry


def preprocess_image(image, output_height, output_width, is_training=False,
                     use_grayscale=False, seed=None, augment=None):
    """Centre crop or zero-pad to the output size, then scale to (x - 128) / 128.

    Training and evaluation are identical, as in TF-Slim, unless training passes
    `augment`, a function of the uint8 image applied after the crop (--augmentation).
    Works for any channel count.
    """
    del is_training, seed  # The augment function carries its own seed.
    image = tf.cast(tf.convert_to_tensor(image), tf.float32)
    if use_grayscale:
        image = image_ops.to_grayscale(image)
    image = tf.image.resize_with_crop_or_pad(image, output_height, output_width)
    if augment is not None:
        image = image_ops.augment_as_uint8(image, augment)
    image = (image - 128.0) / 128.0
    return image_ops.set_output_shape(image, output_height, output_width)


registry.register("lenet")(preprocess_image)
