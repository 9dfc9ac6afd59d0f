"""MobileNetV4's preprocessing, as timm's `pretrained_cfg` of the variants' default
weights says: bicubic, ImageNet's mean and standard deviation, and an evaluation crop
of crop_pct:

- `mobilenet_v4`, crop_pct 0.95: the default weights of `mobilenetv4_conv_medium`
  (e500_r256_in1k), `_conv_large` (e600_r384_in1k), `_hybrid_medium`
  (e200_r256_in12k_ft_in1k) and `_hybrid_large` (ix_e600_r384_in1k);
- `mobilenet_v4_conv_small`, crop_pct 0.875: `mobilenetv4_conv_small.e2400_r224_in1k`.

The transforms are timm's, as preprocessing/vit_preprocessing.py writes them: training,
a random resized crop (8-100 % of the area, aspect 3/4..4/3), the resize and a flip;
evaluation, the shorter side to floor(size / crop_pct) (269 for 256 at 0.95), then the
central crop; (x / 255 - mean) / std. Other weights' pretrained_cfg (an imported
checkpoint's import.json) can replace each value: `mean`, `std`, `crop_fraction` and
`interpolation` are keyword arguments (e.g. mobilenetv4_conv_small.e3600_r256_in1k's
mean and std 0.5, crop_pct 0.95).
"""
from typing import Optional, Sequence

from preprocessing import image_ops
from preprocessing import registry
from preprocessing import vit_preprocessing as timm_transforms

CROP_FRACTIONS = {'mobilenet_v4': 0.95, 'mobilenet_v4_conv_small': 0.875}
INTERPOLATION = 'bicubic'


def _preprocessor(family):
    default_crop_fraction = CROP_FRACTIONS[family]

    def preprocess_image(image, height, width, is_training=False, use_grayscale=False,
                         seed=None, augment=None, mean: Optional[Sequence[float]] = None,
                         std: Optional[Sequence[float]] = None,
                         crop_fraction: Optional[float] = None,
                         interpolation: Optional[str] = None):
        interpolation = interpolation or INTERPOLATION
        if is_training:
            image = timm_transforms.preprocess_for_train(
                image, height, width, interpolation=interpolation, seed=seed,
                augment=augment)
        else:
            image = timm_transforms.preprocess_for_eval(
                image, height, width, crop_fraction=crop_fraction or default_crop_fraction,
                interpolation=interpolation)
        image = timm_transforms.normalise(image, mean or timm_transforms.IMAGENET_MEAN,
                                          std or timm_transforms.IMAGENET_STD)
        if use_grayscale:  # linear per channel: the gray of the normalised channels
            image = image_ops.to_grayscale(image)
        return image_ops.set_output_shape(image, height, width)

    preprocess_image.__name__ = f'preprocess_{family}_image'
    preprocess_image.__doc__ = (
        f"The '{family}' family: float32 [height, width, C], normalised, evaluated at "
        f"crop_pct {default_crop_fraction} unless told otherwise; uint8 input is taken "
        "as pixels, float input as tf.image's [0, 1]. `seed`: the example's [2] seed.")
    return registry.register(family)(preprocess_image)


preprocess_mobilenet_v4_image = _preprocessor('mobilenet_v4')
preprocess_mobilenet_v4_conv_small_image = _preprocessor('mobilenet_v4_conv_small')
