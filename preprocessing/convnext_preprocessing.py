"""ConvNeXt's preprocessing, as its release trains and evaluates ImageNet-1k
(facebookresearch/ConvNeXt, with timm's transforms); float32 out, normalised (the nets
take it as it is: no normalisation inside them).

- training: a random resized crop (8-100 % of the image's area, aspect ratio 3/4..4/3,
  10 attempts; when none fits, the whole image), bicubic resize to the output size,
  random left-right flip;
- evaluation: the shorter side resized to size / CROP_FRACTION (256 for 224, as the
  release's crop_pct 0.875), bicubic, then the central size x size crop;
- pixels in [0, 255] normalised by ImageNet's mean and standard deviation
  ((x - 255 * mean) / (255 * std); mean 0.485, 0.456, 0.406, std 0.229, 0.224, 0.225),
  what Keras's ConvNeXt applications do in their `include_preprocessing` layer.

The release resizes PIL images: bicubic with half-pixel centres, antialiased when
shrinking, rounded to uint8. Here tf.image.resize's bicubic with antialias does the
first two, and values are clipped to [0, 255] (not rounded: the net takes floats).
`augment` (training with --augmentation) runs on the uint8 image after the flip, as
the release runs RandAugment.

The same function is the 'convnext_v2' family: timm's pretrained_cfg of its
`convnextv2_*.fcmae_ft_in1k` weights at 224 says the same (bicubic, crop_pct 0.875,
ImageNet's mean and std).
"""
import tensorflow as tf

from preprocessing import image_ops
from preprocessing import inception_preprocessing
from preprocessing import random_draws
from preprocessing import registry

CROP_FRACTION = 0.875
AREA_RANGE = (0.08, 1.0)
ASPECT_RATIO_RANGE = (3 / 4, 4 / 3)
CROP_ATTEMPTS = 10


def resize_bicubic(image, height, width):
    """PIL-like bicubic resize (half-pixel centres, antialiased), clipped to [0, 255]."""
    resized = tf.image.resize(image, tf.stack([height, width]), method='bicubic',
                              antialias=True)
    return tf.clip_by_value(resized, 0.0, 255.0)


def shorter_side_resize(image, shorter_side, resize=resize_bicubic):
    """Resizes (with `resize(image, height, width)`) so the shorter side is
    `shorter_side`; the longer one keeps the aspect ratio, truncated to whole pixels
    (as torchvision's Resize(int))."""
    shape = tf.shape(image)
    height, width = shape[0], shape[1]
    short, long = tf.minimum(height, width), tf.maximum(height, width)
    scaled_long = tf.cast(tf.cast(shorter_side * long, tf.float64)
                          / tf.cast(short, tf.float64), tf.int32)
    new_height = tf.where(height <= width, shorter_side, scaled_long)
    new_width = tf.where(height <= width, scaled_long, shorter_side)
    return resize(image, new_height, new_width)


def central_crop(image, height, width):
    """The central height x width window; an odd margin puts the extra pixel after it
    (torchvision's CenterCrop rounds the offset)."""
    shape = tf.shape(image)
    top = tf.cast(tf.round(tf.cast(shape[0] - height, tf.float32) / 2), tf.int32)
    left = tf.cast(tf.round(tf.cast(shape[1] - width, tf.float32) / 2), tf.int32)
    return tf.image.crop_to_bounding_box(image, top, left, height, width)


def normalise(image):
    return image_ops.imagenet_normalized(image)


def preprocess_for_train(image, height, width, use_grayscale=False, seed=None,
                         augment=None):
    """Random resized crop, bicubic resize, flip; normalised float32."""
    crop_seed, flip_seed = random_draws.split(seed, 2)
    image = image_ops.rgb_pixels(image)
    whole = tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4])
    image = inception_preprocessing.distorted_bounding_box_crop(
        image, whole, crop_seed, min_object_covered=0.0,
        aspect_ratio_range=ASPECT_RATIO_RANGE, area_range=AREA_RANGE,
        max_attempts=CROP_ATTEMPTS)
    image.set_shape([None, None, 3])  # tf.slice loses the channel count
    image = resize_bicubic(image, height, width)
    image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    if augment is not None:
        image = image_ops.augment_as_uint8(image, augment)
    return _finish(image, height, width, use_grayscale)


def preprocess_for_eval(image, height, width, crop_fraction=CROP_FRACTION,
                        use_grayscale=False):
    """Shorter side to size / crop_fraction, bicubic; central crop; normalised."""
    image = image_ops.rgb_pixels(image)
    shorter_side = int(min(height, width) / crop_fraction)
    image = central_crop(shorter_side_resize(image, shorter_side), height, width)
    return _finish(image, height, width, use_grayscale)


def _finish(image, height, width, use_grayscale):
    image = normalise(image)
    if use_grayscale:  # linear, so gray(normalised) is the normalised gray
        image = image_ops.to_grayscale(image)
    return image_ops.set_output_shape(image, height, width)


def preprocess_image(image, height, width, is_training=False, use_grayscale=False,
                     crop_fraction=CROP_FRACTION, seed=None, augment=None):
    """The 'convnext' family: float32 [height, width, C], ImageNet-normalised. uint8
    input is taken as pixels, float input as tf.image's [0, 1]; one channel is
    repeated to RGB. `seed`: the example's [2] seed (random_draws)."""
    if is_training:
        return preprocess_for_train(image, height, width, use_grayscale, seed, augment)
    return preprocess_for_eval(image, height, width, crop_fraction, use_grayscale)


registry.register('convnext')(preprocess_image)
registry.register('convnext_v2')(preprocess_image)
