"""Mixup and cutmix on one replica's batch, as timm's `Mixup` in its default 'batch' mode.

The batch is mixed with itself reversed (example i with example B-1-i), by one weight
`lam` for the whole batch:
- mixup (Zhang et al. 2018, arXiv:1710.09412): images lam * x + (1 - lam) * reversed(x),
  lam ~ Beta(--mixup_alpha, --mixup_alpha);
- cutmix (Yun et al. 2019, arXiv:1905.04899): a box of about (1 - lam) of the image,
  centred anywhere, is pasted from the partner, lam ~ Beta(--cutmix_alpha,
  --cutmix_alpha); lam is then the part of the image left unpasted once the box is
  clipped at the border (timm's correct_lam), counted in pixels.
A batch is mixed with probability --mix_prob (otherwise lam = 1: unchanged); with both
alphas set, cutmix is picked with probability --mix_switch_prob, else mixup. The labels
become `losses.MixedLabels`: the target is lam * own + (1 - lam) * partner, each
label-smoothed first (timm's mixup_target).

Every draw is a stateless op of the batch's seed (training.loop.model_step draws it from the
checkpointed generator dropout uses), so a seeded run repeats its mixing and a resumed
run mixes as the uninterrupted one did.
"""
import dataclasses

import tensorflow as tf

from core import checks
from preprocessing import random_draws
from training.recipes import losses


@dataclasses.dataclass(frozen=True)
class MixingConfig:
    """timm's Mixup settings ('batch' mode, correct_lam), by this toolkit's flag names."""
    mixup_alpha: float = 0.0  # 0: no mixup
    cutmix_alpha: float = 0.0  # 0: no cutmix
    mix_prob: float = 1.0  # chance that a batch is mixed at all
    mix_switch_prob: float = 0.5  # with both alphas set: chance of cutmix over mixup

    def __post_init__(self):
        checks.check_at_least(0, mixup_alpha=self.mixup_alpha,
                              cutmix_alpha=self.cutmix_alpha)
        checks.check_fraction(mix_prob=self.mix_prob, mix_switch_prob=self.mix_switch_prob)

    @property
    def enabled(self) -> bool:
        return (self.mixup_alpha > 0 or self.cutmix_alpha > 0) and self.mix_prob > 0


def _beta(seed, alpha):
    """One draw of Beta(alpha, alpha), as the ratio of two Gamma(alpha) draws."""
    first_seed, second_seed = random_draws.split(seed, 2)
    first = tf.random.stateless_gamma([], first_seed, alpha)
    second = tf.random.stateless_gamma([], second_seed, alpha)
    # Both may underflow to 0 for a tiny alpha: then lam = 0, still a valid weight.
    return tf.math.divide_no_nan(first, first + second)


def _mixup(images, partners, lam):
    lam_as_images = tf.cast(lam, images.dtype)
    return images * lam_as_images + partners * (1 - lam_as_images), lam


def cutmix_box(height, width, lam, seed):
    """(top, bottom, left, right), ends excluded: timm's rand_bbox, a box of
    int(side * sqrt(1 - lam)) per side centred uniformly, clipped at the border."""
    ratio = tf.sqrt(1.0 - lam)
    cut_height = tf.cast(tf.cast(height, tf.float32) * ratio, tf.int32)
    cut_width = tf.cast(tf.cast(width, tf.float32) * ratio, tf.int32)
    row_seed, column_seed = random_draws.split(seed, 2)
    centre_row = random_draws.uniform(row_seed, 0, height, dtype=tf.int32)
    centre_column = random_draws.uniform(column_seed, 0, width, dtype=tf.int32)
    top = tf.clip_by_value(centre_row - cut_height // 2, 0, height)
    bottom = tf.clip_by_value(centre_row + cut_height // 2, 0, height)
    left = tf.clip_by_value(centre_column - cut_width // 2, 0, width)
    right = tf.clip_by_value(centre_column + cut_width // 2, 0, width)
    return top, bottom, left, right


def _cutmix(images, partners, lam, seed):
    height, width = tf.shape(images)[1], tf.shape(images)[2]
    top, bottom, left, right = cutmix_box(height, width, lam, seed)
    rows, columns = tf.range(height), tf.range(width)
    inside = tf.logical_and(
        tf.logical_and(rows >= top, rows < bottom)[:, tf.newaxis],
        tf.logical_and(columns >= left, columns < right)[tf.newaxis, :])
    pasted = tf.where(inside[tf.newaxis, :, :, tf.newaxis], partners, images)
    area = tf.cast((bottom - top) * (right - left), tf.float32)
    return pasted, 1.0 - area / tf.cast(height * width, tf.float32)


def mix_batch(images, labels, seed, config: MixingConfig):
    """(images, labels) of one batch ([batch, height, width, channels], [batch]) mixed
    as `config` says with the draws of `seed` (a [2] integer tensor; None: a fresh one
    from TensorFlow's global generator). Returns the mixed images and
    `losses.MixedLabels`; with mixing off, the batch unchanged."""
    if not config.enabled:
        return images, labels
    apply_seed, switch_seed, lam_seed, box_seed = random_draws.split(seed, 4)
    partners = tf.reverse(images, axis=[0])
    both = config.mixup_alpha > 0 and config.cutmix_alpha > 0
    if both:
        use_cutmix = random_draws.uniform(switch_seed, 0.0, 1.0) < config.mix_switch_prob
        alpha = tf.where(use_cutmix, config.cutmix_alpha, config.mixup_alpha)
    else:
        use_cutmix = config.cutmix_alpha > 0
        alpha = tf.constant(config.cutmix_alpha if use_cutmix else config.mixup_alpha)
    mixed = random_draws.uniform(apply_seed, 0.0, 1.0) < config.mix_prob
    # A batch left unmixed has lam = 1: mixup then keeps every value, cutmix pastes none.
    lam = tf.where(mixed, _beta(lam_seed, alpha), 1.0)

    def cutmix():
        return _cutmix(images, partners, lam, box_seed)

    def mixup():
        return _mixup(images, partners, lam)

    if both:
        images, weight = tf.cond(use_cutmix, cutmix, mixup)
    else:
        images, weight = cutmix() if use_cutmix else mixup()
    return images, losses.MixedLabels(labels, tf.reverse(labels, axis=[0]), weight)
