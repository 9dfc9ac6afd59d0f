"""RandAugment and AutoAugment: which augment_ops run on an image, with which parameters.

The magnitude scale (0..10), its mapping to each op's parameter, RandAugment's op list
and AutoAugment's ImageNet policy are those of the papers' code as TF Model Garden's
official/vision/ops/augment.py keeps it (RandAugment(), and AutoAugment('v0')):

  Rotate       magnitude / 10 * 30 degrees, either direction
  ShearX/Y     magnitude / 10 * 0.3, either direction
  TranslateX/Y magnitude / 10 * translate pixels, either direction
  Color, Contrast, Brightness, Sharpness   factor magnitude / 10 * 1.8 + 0.1
  Posterize    int(magnitude / 10 * 4) bits kept
  Solarize     threshold int(magnitude / 10 * 256)
  SolarizeAdd  int(magnitude / 10 * 110) added below 128
  Cutout       square of half side int(magnitude / 10 * cutout pixels), filled grey

The translate and cutout pixels are Model Garden's for 224x224 images (RandAugment: 100
and 40, AutoAugment: 250 and 100); other sizes scale them with the shorter side, as timm
does, so a 32x32 image is not translated off its canvas.

Every random choice (which op, sub-policy, direction, whether an op applies, where the
cutout goes) is drawn from the example's seed with stateless ops (random_draws).
"""
import dataclasses

import tensorflow as tf

from core import checks
from core.errors import UsageError
from preprocessing import augment_ops
from preprocessing import random_draws

POLICY_NAMES = ('none', 'randaugment', 'autoaugment')
MAX_MAGNITUDE = 10.0
REFERENCE_SIZE = 224


@dataclasses.dataclass(frozen=True)
class PixelConstants:
    """Translate and cutout sizes, in pixels of a REFERENCE_SIZE image."""
    translate: float
    cutout: float


RANDAUGMENT_PIXELS = PixelConstants(translate=100.0, cutout=40.0)
AUTOAUGMENT_PIXELS = PixelConstants(translate=250.0, cutout=100.0)

# RandAugment draws one of these, or none of them, per layer: 17 equally likely choices.
RANDAUGMENT_OPS = ('AutoContrast', 'Equalize', 'Invert', 'Rotate', 'Posterize', 'Solarize',
                   'Color', 'Contrast', 'Brightness', 'Sharpness', 'ShearX', 'ShearY',
                   'TranslateX', 'TranslateY', 'Cutout', 'SolarizeAdd')

# AutoAugment's ImageNet policy: one sub-policy drawn per image, each of its
# (op, probability, magnitude) applied in order with its probability.
AUTOAUGMENT_IMAGENET_POLICY = (
    (('Equalize', 0.8, 1), ('ShearY', 0.8, 4)),
    (('Color', 0.4, 9), ('Equalize', 0.6, 3)),
    (('Color', 0.4, 1), ('Rotate', 0.6, 8)),
    (('Solarize', 0.8, 3), ('Equalize', 0.4, 7)),
    (('Solarize', 0.4, 2), ('Solarize', 0.6, 2)),
    (('Color', 0.2, 0), ('Equalize', 0.8, 8)),
    (('Equalize', 0.4, 8), ('SolarizeAdd', 0.8, 3)),
    (('ShearX', 0.2, 9), ('Rotate', 0.6, 8)),
    (('Color', 0.6, 1), ('Equalize', 1.0, 2)),
    (('Invert', 0.4, 9), ('Rotate', 0.6, 0)),
    (('Equalize', 1.0, 9), ('ShearY', 0.6, 3)),
    (('Color', 0.4, 7), ('Equalize', 0.6, 0)),
    (('Posterize', 0.4, 6), ('AutoContrast', 0.4, 7)),
    (('Solarize', 0.6, 8), ('Color', 0.6, 9)),
    (('Solarize', 0.2, 4), ('Rotate', 0.8, 9)),
    (('Rotate', 1.0, 7), ('TranslateY', 0.8, 9)),
    (('ShearX', 0.0, 0), ('Solarize', 0.8, 4)),
    (('ShearY', 0.8, 0), ('Color', 0.6, 4)),
    (('Color', 1.0, 0), ('Rotate', 0.6, 2)),
    (('Equalize', 0.8, 4), ('Equalize', 0.0, 8)),
    (('Equalize', 1.0, 4), ('AutoContrast', 0.6, 2)),
    (('ShearY', 0.4, 7), ('SolarizeAdd', 0.6, 7)),
    (('Posterize', 0.8, 2), ('Solarize', 0.6, 10)),
    (('Solarize', 0.6, 8), ('Equalize', 0.6, 1)),
    (('Color', 0.8, 6), ('Rotate', 0.4, 5)),
)


@dataclasses.dataclass(frozen=True)
class AugmentationConfig:
    """What training adds to a family's preprocessing (fields named as their flags)."""
    augmentation: str = 'none'          # one of POLICY_NAMES
    randaugment_layers: int = 2         # RandAugment's N
    randaugment_magnitude: float = 10.0  # RandAugment's M, 0..10
    random_erase_prob: float = 0.0      # applied after normalisation (random_erasing)

    def __post_init__(self):
        if self.augmentation not in POLICY_NAMES:
            raise UsageError(f'--augmentation={self.augmentation} is not one of '
                             f'{", ".join(POLICY_NAMES)}.')
        checks.check_at_least(1, randaugment_layers=self.randaugment_layers)
        magnitude = self.randaugment_magnitude
        if not 0 <= magnitude <= MAX_MAGNITUDE:
            raise UsageError(f'--randaugment_magnitude={magnitude:g} is out of range; pass '
                             f'a value in [0, {MAX_MAGNITUDE:g}] (the papers\' scale; 10 is '
                             f'the default, 9 timm\'s rand-m9).')
        checks.check_fraction(random_erase_prob=self.random_erase_prob)

    @property
    def changes_training(self) -> bool:
        """Whether training preprocessing differs from the family's own."""
        return self.augmentation != 'none' or self.random_erase_prob > 0


def _fraction(magnitude):
    return magnitude / MAX_MAGNITUDE


def _enhance_factor(magnitude):
    return _fraction(magnitude) * 1.8 + 0.1


def _scaled_pixels(pixels, image):
    """`pixels` of a REFERENCE_SIZE image, for this image's shorter side; a Python float
    when the size is known while tracing (exact at 224), else a float32 tensor."""
    height, width = image.shape[0], image.shape[1]
    if height is not None and width is not None:
        return pixels * (min(height, width) / REFERENCE_SIZE)
    side = tf.cast(tf.reduce_min(tf.shape(image)[:2]), tf.float32)
    return pixels * side / REFERENCE_SIZE


def _whole_pixels(pixels):
    return int(pixels) if isinstance(pixels, float) else tf.cast(pixels, tf.int32)


def _either_direction(value, seed):
    """value or -value, each half of the time."""
    return tf.where(random_draws.uniform(seed, 0.0, 1.0) < 0.5, -value, value)


def _cutout(image, magnitude, seed, pixels):
    half_size = _whole_pixels(_scaled_pixels(_fraction(magnitude) * pixels.cutout, image))
    row_seed, column_seed = random_draws.split(seed, 2)
    shape = tf.shape(image)
    return augment_ops.cutout(image, half_size,
                              random_draws.uniform(row_seed, 0, shape[0], tf.int32),
                              random_draws.uniform(column_seed, 0, shape[1], tf.int32))


def _translate(translate):
    def apply(image, magnitude, seed, pixels):
        shift = _scaled_pixels(_fraction(magnitude) * pixels.translate, image)
        return translate(image, _either_direction(shift, seed))
    return apply


# name -> fn(uint8 image, magnitude, seed for its random choices, PixelConstants).
_OPS = {
    'Identity': lambda image, magnitude, seed, pixels: augment_ops.identity(image),
    'AutoContrast': lambda image, magnitude, seed, pixels: augment_ops.auto_contrast(image),
    'Equalize': lambda image, magnitude, seed, pixels: augment_ops.equalize(image),
    'Invert': lambda image, magnitude, seed, pixels: augment_ops.invert(image),
    'Rotate': lambda image, magnitude, seed, pixels: augment_ops.rotate(
        image, _either_direction(_fraction(magnitude) * 30.0, seed)),
    'Posterize': lambda image, magnitude, seed, pixels: augment_ops.posterize(
        image, int(_fraction(magnitude) * 4)),
    'Solarize': lambda image, magnitude, seed, pixels: augment_ops.solarize(
        image, int(_fraction(magnitude) * 256)),
    'SolarizeAdd': lambda image, magnitude, seed, pixels: augment_ops.solarize_add(
        image, int(_fraction(magnitude) * 110)),
    'Color': lambda image, magnitude, seed, pixels: augment_ops.color(
        image, _enhance_factor(magnitude)),
    'Contrast': lambda image, magnitude, seed, pixels: augment_ops.contrast(
        image, _enhance_factor(magnitude)),
    'Brightness': lambda image, magnitude, seed, pixels: augment_ops.brightness(
        image, _enhance_factor(magnitude)),
    'Sharpness': lambda image, magnitude, seed, pixels: augment_ops.sharpness(
        image, _enhance_factor(magnitude)),
    'ShearX': lambda image, magnitude, seed, pixels: augment_ops.shear_x(
        image, _either_direction(_fraction(magnitude) * 0.3, seed)),
    'ShearY': lambda image, magnitude, seed, pixels: augment_ops.shear_y(
        image, _either_direction(_fraction(magnitude) * 0.3, seed)),
    'TranslateX': _translate(augment_ops.translate_x),
    'TranslateY': _translate(augment_ops.translate_y),
    'Cutout': _cutout,
}
OP_NAMES = tuple(name for name in _OPS if name != 'Identity')


def apply_op(name, image, magnitude, seed, pixels=RANDAUGMENT_PIXELS):
    """Op `name` at `magnitude` (0..10) on a uint8 image; same shape and dtype out."""
    augmented = _OPS[name](image, magnitude, seed, pixels)
    augmented.set_shape(image.shape)  # branches of a switch must agree on static shapes
    return augmented


def randaugment(image, num_layers, magnitude, seed=None):
    """`num_layers` times: one of RANDAUGMENT_OPS or nothing, uniformly, at `magnitude`."""
    choices = RANDAUGMENT_OPS + ('Identity',)
    for layer_seed in random_draws.split(seed, num_layers):
        choice_seed, op_seed = random_draws.split(layer_seed, 2)
        image = random_draws.choice(
            choice_seed, len(choices),
            lambda k, image=image, op_seed=op_seed: lambda: apply_op(
                choices[k], image, magnitude, op_seed, RANDAUGMENT_PIXELS))
    return image


def _maybe_apply(image, name, probability, magnitude, seed, pixels):
    """apply_op with `probability` (drawn from the first half of `seed`)."""
    if probability <= 0:
        return image
    apply_seed, op_seed = random_draws.split(seed, 2)
    if probability >= 1:
        return apply_op(name, image, magnitude, op_seed, pixels)
    return tf.cond(random_draws.uniform(apply_seed, 0.0, 1.0) < probability,
                   lambda: apply_op(name, image, magnitude, op_seed, pixels),
                   lambda: image)


def autoaugment(image, seed=None, policy=AUTOAUGMENT_IMAGENET_POLICY,
                pixels=AUTOAUGMENT_PIXELS):
    """One sub-policy of `policy`, uniformly, its ops each with their probability."""
    longest = max(len(sub_policy) for sub_policy in policy)
    choice_seed, *op_seeds = random_draws.split(seed, 1 + longest)

    def sub_policy_case(k):
        def apply():
            augmented = image
            for (name, probability, magnitude), op_seed in zip(policy[k], op_seeds):
                augmented = _maybe_apply(augmented, name, probability, magnitude, op_seed,
                                         pixels)
            return augmented
        return apply

    return random_draws.choice(choice_seed, len(policy), sub_policy_case)


def policy_fn(config: AugmentationConfig):
    """fn(uint8 image, seed) -> uint8 image for config's policy; None for 'none'."""
    if config.augmentation == 'randaugment':
        return lambda image, seed: randaugment(image, config.randaugment_layers,
                                               config.randaugment_magnitude, seed)
    if config.augmentation == 'autoaugment':
        return lambda image, seed: autoaugment(image, seed)
    return None
