"""CIFAR-10 preprocessing, as TF-Slim's cifarnet_preprocessing."""
import tensorflow as tf

from preprocessing import image_ops
from preprocessing import registry

PADDING = 4


def preprocess_for_train(image, output_height, output_width, padding=PADDING,
                         use_grayscale=False):
    """Zero-pad, random crop, random flip, brightness/contrast jitter, standardize."""
    image = tf.cast(tf.convert_to_tensor(image), tf.float32)
    if use_grayscale:
        image = image_ops.to_grayscale(image)
    if padding > 0:
        image = tf.pad(image, [[padding, padding], [padding, padding], [0, 0]])
    # TF-Slim hard-codes 3 channels here; keep the input's so MNIST works too.
    crop_size = tf.stack([output_height, output_width, tf.shape(image)[-1]])
    image = image_ops.set_output_shape(
        tf.image.random_crop(image, crop_size), output_height, output_width)
    image = tf.image.random_flip_left_right(image)
    # As in TF-Slim, although standardization cancels the brightness shift.
    image = tf.image.random_brightness(image, max_delta=63)
    image = tf.image.random_contrast(image, lower=0.2, upper=1.8)
    return tf.image.per_image_standardization(image)


def preprocess_for_eval(image, output_height, output_width, use_grayscale=False):
    """Centre crop or zero-pad to the output size (no resize), then standardize."""
    image = tf.cast(tf.convert_to_tensor(image), tf.float32)
    if use_grayscale:
        image = image_ops.to_grayscale(image)
    image = tf.image.resize_with_crop_or_pad(image, output_height, output_width)
    image = tf.image.per_image_standardization(image)
    return image_ops.set_output_shape(image, output_height, output_width)


def preprocess_image(image, output_height, output_width, is_training=False,
                     use_grayscale=False, padding=PADDING):
    """Float32 [output_height, output_width, C] image, standardized per image."""
    if is_training:
        return preprocess_for_train(image, output_height, output_width,
                                    padding=padding, use_grayscale=use_grayscale)
    return preprocess_for_eval(image, output_height, output_width,
                               use_grayscale=use_grayscale)


registry.register("cifarnet")(preprocess_image)
