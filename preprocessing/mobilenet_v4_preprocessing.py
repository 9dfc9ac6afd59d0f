"""MobileNetV4's preprocessing, as timm's `pretrained_cfg` of the variants' default
weights says: bicubic, ImageNet's mean and standard deviation, and an evaluation crop
of crop_pct:

- `mobilenet_v4`, crop_pct 0.95: the default weights of `mobilenetv4_conv_medium`
  (e500_r256_in1k), `_conv_large` (e600_r384_in1k), `_hybrid_medium`
  (e200_r256_in12k_ft_in1k) and `_hybrid_large` (ix_e600_r384_in1k);
- `mobilenet_v4_conv_small`, crop_pct 0.875: `mobilenetv4_conv_small.e2400_r224_in1k`.

Otherwise it is ConvNeXt's function (preprocessing/convnext_preprocessing.py, timm's
transforms): training, a random resized crop (8-100 % of the area, aspect 3/4..4/3),
bicubic resize and a flip; evaluation, the shorter side to floor(size / crop_pct) (269
for 256 at 0.95), bicubic, then the central crop.
"""
from preprocessing import convnext_preprocessing
from preprocessing import registry

CROP_FRACTIONS = {'mobilenet_v4': 0.95, 'mobilenet_v4_conv_small': 0.875}


def _preprocessor(family):
    default_crop_fraction = CROP_FRACTIONS[family]

    def preprocess_image(image, height, width, is_training=False, use_grayscale=False,
                         crop_fraction=default_crop_fraction, seed=None, augment=None):
        return convnext_preprocessing.preprocess_image(
            image, height, width, is_training=is_training, use_grayscale=use_grayscale,
            crop_fraction=crop_fraction, seed=seed, augment=augment)

    preprocess_image.__name__ = f'preprocess_{family}_image'
    preprocess_image.__doc__ = (
        f"The '{family}' family: float32 [height, width, C], ImageNet-normalised, "
        f"evaluated at crop_pct {default_crop_fraction}; uint8 input is taken as pixels, "
        "float input as tf.image's [0, 1]. `seed`: the example's [2] seed.")
    return registry.register(family)(preprocess_image)


preprocess_mobilenet_v4_image = _preprocessor('mobilenet_v4')
preprocess_mobilenet_v4_conv_small_image = _preprocessor('mobilenet_v4_conv_small')
