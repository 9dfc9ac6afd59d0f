"""EfficientNetV2's preprocessing for S, M and L, as the official release (google/automl
`efficientnetv2/preprocessing.py`) does it; float32 out in about [-1, 1]. (B0-B3 use
'efficientnet', as the release trains them.)

- training: a random crop of 5-100 % of the area (aspect 3/4..4/3, nothing to cover),
  bilinear resize (TF2's, half-pixel centres), random left-right flip;
- evaluation: below 320 pixels the central square of side size / (size + 32), from 320
  on (S at 384, M and L at 480) the whole image; bilinear resize;
- pixels normalised to [-1, 1]: (x - 128) / 128.

`augment` (training with --augmentation) runs on the uint8 image after the flip.
"""
import tensorflow as tf

from preprocessing import efficientnet_preprocessing
from preprocessing import image_ops
from preprocessing import inception_preprocessing
from preprocessing import random_draws
from preprocessing import registry

CROP_BELOW = 320  # larger sizes are evaluated on the whole image


def normalise(image):
    return (image - 128.0) / 128.0


def preprocess_image(image, height, width, is_training=False, use_grayscale=False,
                     seed=None, augment=None):
    """float32 [height, width, C] in about [-1, 1]."""
    image = image_ops.rgb_pixels(image)
    if not is_training:
        size = min(height, width)
        if size < CROP_BELOW:
            image = efficientnet_preprocessing.central_square(image, size, False)
        image = tf.image.resize(image, [height, width])
        return efficientnet_preprocessing.finish(image, height, width, use_grayscale, normalise)
    crop_seed, flip_seed = random_draws.split(seed, 2)
    image = inception_preprocessing.distorted_bounding_box_crop(
        image, tf.zeros([0, 0, 4]), crop_seed, min_object_covered=0.0,
        area_range=(0.05, 1.0))
    image.set_shape([None, None, 3])
    image = tf.image.resize(image, [height, width])
    image = efficientnet_preprocessing.flip_and_augment(image, flip_seed, augment)
    return efficientnet_preprocessing.finish(image, height, width, use_grayscale, normalise)


registry.register('efficientnet_v2')(preprocess_image)
