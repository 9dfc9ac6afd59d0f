"""The Vision Transformers' preprocessing, as timm's transforms with each family's
`pretrained_cfg`; float32 out, normalised (the nets take it as it is).

| family | mean | std | crop_pct | interpolation | whose |
|---|---|---|---|---|---|
| `vit` | 0.5 | 0.5 | 0.9 | bicubic | timm's `vit_*_patch*_224` (AugReg) |
| `dinov2` | ImageNet's | ImageNet's | 1.0 | bicubic | timm's `vit_*_patch14_dinov2` |

- training: a random resized crop (8-100 % of the area, aspect 3/4..4/3, 10 attempts),
  resized with the interpolation, random left-right flip (timm's
  transforms_imagenet_train without its colour jitter; --augmentation adds a policy);
- evaluation: the shorter side resized to floor(size / crop_pct) (248 for 224 at 0.9),
  then the central size x size crop (timm's transforms_imagenet_eval);
- normalisation on [0, 1] pixels: (x / 255 - mean) / std.

The resize, the centre crop and the random crop are ConvNeXt's (preprocessing/
convnext_preprocessing.py: tf.image.resize with antialias, as PIL, clipped to [0, 255]).
An imported timm checkpoint's own pretrained_cfg can replace the family's values: mean,
std, crop_fraction and interpolation are keyword arguments of `preprocess_image`.
"""
import math
from typing import Optional, Sequence

import tensorflow as tf

from preprocessing import convnext_preprocessing as convnext
from preprocessing import image_ops
from preprocessing import inception_preprocessing
from preprocessing import random_draws
from preprocessing import registry

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# Family -> (mean, std, crop_pct, interpolation), as timm's pretrained_cfg.
FAMILIES = {
    'vit': ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5), 0.9, 'bicubic'),
    'dinov2': (IMAGENET_MEAN, IMAGENET_STD, 1.0, 'bicubic'),
}
INTERPOLATIONS = ('bicubic', 'bilinear')


def resize(image, height, width, interpolation='bicubic'):
    """PIL-like resize (half-pixel centres, antialiased), clipped to [0, 255]."""
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f'interpolation must be one of {INTERPOLATIONS}, got '
                         f'{interpolation!r}.')
    if interpolation == 'bicubic':
        return convnext.resize_bicubic(image, height, width)
    resized = tf.image.resize(image, tf.stack([height, width]), method='bilinear',
                              antialias=True)
    return tf.clip_by_value(resized, 0.0, 255.0)


def normalise(image, mean: Sequence[float], std: Sequence[float]):
    """[0, 255] pixels to (x / 255 - mean) / std."""
    return (image / 255.0 - tf.constant(mean, tf.float32)) / tf.constant(std, tf.float32)


def shorter_side(size: int, crop_fraction: float) -> int:
    """timm's scale_size: floor(size / crop_pct)."""
    return int(math.floor(size / crop_fraction))


def preprocess_for_train(image, height, width, *, interpolation, seed=None, augment=None):
    """Random resized crop, resize, flip: [0, 255] floats."""
    crop_seed, flip_seed = random_draws.split(seed, 2)
    image = image_ops.rgb_pixels(image)
    whole = tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4])
    image = inception_preprocessing.distorted_bounding_box_crop(
        image, whole, crop_seed, min_object_covered=0.0,
        aspect_ratio_range=convnext.ASPECT_RATIO_RANGE, area_range=convnext.AREA_RANGE,
        max_attempts=convnext.CROP_ATTEMPTS)
    image.set_shape([None, None, 3])  # tf.slice loses the channel count
    image = resize(image, height, width, interpolation)
    image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    if augment is not None:
        image = image_ops.augment_as_uint8(image, augment)
    return image


def preprocess_for_eval(image, height, width, *, crop_fraction, interpolation):
    """Shorter side to floor(size / crop_fraction), central crop: [0, 255] floats."""
    image = image_ops.rgb_pixels(image)
    side = shorter_side(min(height, width), crop_fraction)
    image = convnext.shorter_side_resize(
        image, side, lambda pixels, h, w: resize(pixels, h, w, interpolation))
    return convnext.central_crop(image, height, width)


def _preprocessor(family):
    default_mean, default_std, default_crop, default_interpolation = FAMILIES[family]

    def preprocess_image(image, height, width, is_training=False, use_grayscale=False,
                         seed=None, augment=None, mean: Optional[Sequence[float]] = None,
                         std: Optional[Sequence[float]] = None,
                         crop_fraction: Optional[float] = None,
                         interpolation: Optional[str] = None):
        interpolation = interpolation or default_interpolation
        if is_training:
            image = preprocess_for_train(image, height, width, interpolation=interpolation,
                                         seed=seed, augment=augment)
        else:
            image = preprocess_for_eval(image, height, width,
                                        crop_fraction=crop_fraction or default_crop,
                                        interpolation=interpolation)
        image = normalise(image, mean or default_mean, std or default_std)
        if use_grayscale:  # linear per channel: the gray of the normalised channels
            image = image_ops.to_grayscale(image)
        return image_ops.set_output_shape(image, height, width)

    preprocess_image.__name__ = f'preprocess_{family}_image'
    preprocess_image.__doc__ = (
        f"The '{family}' family: float32 [height, width, C], normalised. uint8 input is "
        "taken as pixels, float input as tf.image's [0, 1]; one channel is repeated to "
        "RGB. `seed`: the example's [2] seed (random_draws).")
    return registry.register(family)(preprocess_image)


preprocess_vit_image = _preprocessor('vit')
preprocess_dinov2_image = _preprocessor('dinov2')
