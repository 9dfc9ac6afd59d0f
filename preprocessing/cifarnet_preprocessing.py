"""CIFAR-10 preprocessing, as TF-Slim's cifarnet_preprocessing."""
import tensorflow as tf

from preprocessing import image_ops
from preprocessing import random_draws
from preprocessing import registry

PADDING = 4


def preprocess_for_train(image, output_height, output_width, padding=PADDING,
                         use_grayscale=False, seed=None, augment=None):
    """Zero-pad, random crop, random flip, brightness/contrast jitter, standardize.

    `seed`: the example's [2] seed, every random choice drawn from it (random_draws).
    `augment`: a function of the uint8 image, applied after the crop and flip (training
    with --augmentation); None leaves TF-Slim's path unchanged.
    """
    crop_seed, flip_seed, brightness_seed, contrast_seed = random_draws.split(seed, 4)
    image = tf.cast(tf.convert_to_tensor(image), tf.float32)
    if use_grayscale:
        image = image_ops.to_grayscale(image)
    if padding > 0:
        image = tf.pad(image, [[padding, padding], [padding, padding], [0, 0]])
    # TF-Slim hard-codes 3 channels here; keep the input's so MNIST works too.
    crop_size = tf.stack([output_height, output_width, tf.shape(image)[-1]])
    image = image_ops.set_output_shape(
        tf.image.stateless_random_crop(image, crop_size, crop_seed),
        output_height, output_width)
    image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    if augment is not None:
        image = image_ops.augment_as_uint8(image, augment)
    # As in TF-Slim, although standardization cancels the brightness shift.
    image = tf.image.stateless_random_brightness(image, 63, brightness_seed)
    image = tf.image.stateless_random_contrast(image, 0.2, 1.8, contrast_seed)
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
                     use_grayscale=False, padding=PADDING, seed=None, augment=None):
    """Float32 [output_height, output_width, C] image, standardized per image."""
    if is_training:
        return preprocess_for_train(image, output_height, output_width,
                                    padding=padding, use_grayscale=use_grayscale,
                                    seed=seed, augment=augment)
    return preprocess_for_eval(image, output_height, output_width,
                               use_grayscale=use_grayscale)


registry.register("cifarnet")(preprocess_image)
