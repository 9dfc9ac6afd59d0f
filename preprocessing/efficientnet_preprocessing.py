"""EfficientNet's preprocessing, as the official release does it; float32 out, normalised
(the nets take it as it is: no normalisation inside them). Its helpers serve
'efficientnet_v2' too (preprocessing/efficientnet_v2_preprocessing.py).

'efficientnet' (EfficientNet B0-B7, tensorflow/tpu `preprocessing.py`; EfficientNetV2
B0-B3, whose release trains them with that same "legacy" preprocessing):
- training: a random box crop (at least 10 % of the image covered, aspect 3/4..4/3,
  8-100 % of the area, 10 attempts; when none fits, the evaluation crop instead),
  TF1 bicubic resize, random left-right flip;
- evaluation: the central square of side size / (size + 32) of the shorter side (32
  pixels of padding at 224: 87.5 %), TF1 bicubic resize;
- pixels in [0, 255] normalised by ImageNet's mean and standard deviation
  ((x - 255 * mean) / (255 * std), mean 0.485, 0.456, 0.406, std 0.229, 0.224, 0.225).

`augment` (training with --augmentation) runs on the uint8 image after the flip, as the
releases run AutoAugment / RandAugment.
"""
import tensorflow as tf

from preprocessing import image_ops
from preprocessing import inception_preprocessing
from preprocessing import random_draws
from preprocessing import registry

CROP_PADDING = 32


def central_square(image, size, centre_rounding_up):
    """The central square of side size / (size + CROP_PADDING) of the shorter side (the
    EfficientNet release rounds its offsets up, V2's down)."""
    shape = tf.shape(image)
    height, width = shape[0], shape[1]
    fraction = size / (size + CROP_PADDING)
    side = tf.cast(fraction * tf.cast(tf.minimum(height, width), tf.float32), tf.int32)
    up = 1 if centre_rounding_up else 0
    return tf.image.crop_to_bounding_box(image, (height - side + up) // 2,
                                         (width - side + up) // 2, side, side)


def finish(image, height, width, use_grayscale, normalise):
    image = normalise(image)
    if use_grayscale:  # linear, so gray(normalised) is the normalised gray
        image = image_ops.to_grayscale(image)
    return image_ops.set_output_shape(image, height, width)


def flip_and_augment(image, flip_seed, augment):
    image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    if augment is not None:
        image = image_ops.augment_as_uint8(image, augment)
    return image


def normalise(image):
    return image_ops.imagenet_normalized(image)


def preprocess_image(image, height, width, is_training=False, use_grayscale=False,
                     seed=None, augment=None):
    """The 'efficientnet' family: float32 [height, width, C], ImageNet-normalised."""
    image = image_ops.rgb_pixels(image)
    size = min(height, width)
    if not is_training:
        image = image_ops.resize_bicubic_tf1(central_square(image, size, True),
                                             height, width)
        return finish(image, height, width, use_grayscale, normalise)
    crop_seed, flip_seed = random_draws.split(seed, 2)
    whole = tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4])
    crop = inception_preprocessing.distorted_bounding_box_crop(
        image, whole, crop_seed, min_object_covered=0.1, aspect_ratio_range=(3 / 4, 4 / 3),
        area_range=(0.08, 1.0), max_attempts=10)
    # The sampler gives the whole image when no box fits: then the evaluation crop.
    failed = tf.reduce_all(tf.equal(tf.shape(crop), tf.shape(image)))
    crop = tf.cond(failed, lambda: central_square(image, size, True), lambda: crop)
    image = image_ops.resize_bicubic_tf1(crop, height, width)
    image = flip_and_augment(image, flip_seed, augment)
    return finish(image, height, width, use_grayscale, normalise)


registry.register('efficientnet')(preprocess_image)
