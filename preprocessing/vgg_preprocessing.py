"""VGG/ResNet preprocessing, as TF-Slim's vgg_preprocessing (per-channel mean subtraction)."""
import tensorflow as tf

from preprocessing import image_ops
from preprocessing import random_draws
from preprocessing import registry

R_MEAN = 123.68
G_MEAN = 116.78
B_MEAN = 103.94

RESIZE_SIDE_MIN = 256
RESIZE_SIDE_MAX = 512


def _crop(image, offset_height, offset_width, crop_height, crop_width):
    """Crops [crop_height, crop_width] at the offsets; fails if the image is too small."""
    shape = tf.shape(image)
    with tf.control_dependencies([tf.debugging.assert_greater_equal(
            shape[:2], tf.stack([crop_height, crop_width]),
            message="Crop size greater than the image size.")]):
        image = tf.slice(image, tf.stack([offset_height, offset_width, 0]),
                         tf.stack([crop_height, crop_width, shape[2]]))
    return image_ops.set_output_shape(image, crop_height, crop_width)


def _random_crop(image, crop_height, crop_width, seed):
    """Crop at offsets uniform over every position that fits."""
    shape = tf.shape(image)
    height_seed, width_seed = random_draws.split(seed, 2)
    offset_height = random_draws.uniform(
        height_seed, 0, tf.maximum(shape[0] - crop_height + 1, 1), dtype=tf.int32)
    offset_width = random_draws.uniform(
        width_seed, 0, tf.maximum(shape[1] - crop_width + 1, 1), dtype=tf.int32)
    return _crop(image, offset_height, offset_width, crop_height, crop_width)


def _central_crop(image, crop_height, crop_width):
    """Crop at the centre; odd margins put the extra pixel after the crop."""
    shape = tf.shape(image)
    offset_height = (shape[0] - crop_height) // 2
    offset_width = (shape[1] - crop_width) // 2
    return _crop(image, offset_height, offset_width, crop_height, crop_width)


def _smallest_size_at_least(height, width, smallest_side):
    """New (height, width) with the smaller side equal to `smallest_side`, aspect kept."""
    height = tf.cast(height, tf.float32)
    width = tf.cast(width, tf.float32)
    smallest_side = tf.cast(smallest_side, tf.float32)
    scale = tf.where(height > width, smallest_side / width, smallest_side / height)
    new_height = tf.cast(tf.math.rint(height * scale), tf.int32)
    new_width = tf.cast(tf.math.rint(width * scale), tf.int32)
    return new_height, new_width


def _aspect_preserving_resize(image, smallest_side):
    """TF1 bilinear resize so the smaller side is `smallest_side`; float32 out."""
    shape = tf.shape(image)
    new_height, new_width = _smallest_size_at_least(shape[0], shape[1], smallest_side)
    return image_ops.resize_bilinear_tf1(image, new_height, new_width)


def _subtract_means(image, use_grayscale):
    """Subtracts the RGB means, then optionally converts to one channel.

    TF-Slim converts first and then fails on 3 means for 1 channel; the conversion
    is linear, so this order gives gray(image) - gray(means).
    """
    image = image - tf.constant([R_MEAN, G_MEAN, B_MEAN], dtype=tf.float32)
    if use_grayscale:
        image = image_ops.to_grayscale(image)
    return image


def preprocess_for_train(image, output_height, output_width,
                         resize_side_min=RESIZE_SIDE_MIN, resize_side_max=RESIZE_SIDE_MAX,
                         use_grayscale=False, seed=None, augment=None):
    """Smaller side uniform in [min, max], random crop, random flip, minus means.

    `seed`: the example's [2] seed, every random choice drawn from it (random_draws).
    `augment`: a function of the uint8 image, applied after the crop and flip (training
    with --augmentation); None leaves TF-Slim's path unchanged.
    """
    resize_seed, crop_seed, flip_seed = random_draws.split(seed, 3)
    image = image_ops.to_rgb(tf.convert_to_tensor(image))
    resize_side = random_draws.uniform(resize_seed, resize_side_min, resize_side_max + 1,
                                       dtype=tf.int32)
    image = _aspect_preserving_resize(image, resize_side)
    image = _random_crop(image, output_height, output_width, crop_seed)
    image = tf.image.stateless_random_flip_left_right(tf.cast(image, tf.float32), flip_seed)
    if augment is not None:
        image = image_ops.augment_as_uint8(image, augment)
    return _subtract_means(image, use_grayscale)


def preprocess_for_eval(image, output_height, output_width, resize_side=RESIZE_SIDE_MIN,
                        use_grayscale=False):
    """Smaller side to `resize_side`, central crop, minus means."""
    image = image_ops.to_rgb(tf.convert_to_tensor(image))
    image = _aspect_preserving_resize(image, resize_side)
    image = _central_crop(image, output_height, output_width)
    return _subtract_means(tf.cast(image, tf.float32), use_grayscale)


def preprocess_image(image, output_height, output_width, is_training=False,
                     use_grayscale=False, resize_side_min=RESIZE_SIDE_MIN,
                     resize_side_max=RESIZE_SIDE_MAX, seed=None, augment=None):
    """Float32 [output_height, output_width, C] with the ImageNet RGB means removed.

    Evaluation resizes the smaller side to `resize_side_min`. One-channel input is
    repeated to RGB first.
    """
    if is_training:
        return preprocess_for_train(image, output_height, output_width,
                                    resize_side_min, resize_side_max, use_grayscale, seed,
                                    augment)
    return preprocess_for_eval(image, output_height, output_width, resize_side_min,
                               use_grayscale)


registry.register("vgg")(preprocess_image)
