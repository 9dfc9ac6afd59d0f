"""Random erasing (Zhong et al. 2017, arXiv:1708.04896) as timm defines it.

With probability p, one rectangle of the normalised image is replaced by noise: its area
a uniform fraction of the image in [0.02, 1/3], its aspect ratio (height / width)
log-uniform in [0.3, 1/0.3], its place uniform over the positions where it fits; up to
10 draws of area and aspect are tried, the first that fits is used (none fits: nothing
is erased). The fill is timm's 'pixel' mode: independent standard normal values per
pixel and channel, which fits the families' normalised ranges (inception, lenet: [-1, 1];
cifarnet: standardized); for vgg's mean-subtracted range (about +-128) it amounts to
erasing to the mean colour.
"""
import math

import tensorflow as tf

from preprocessing import random_draws

MIN_AREA = 0.02
MAX_AREA = 1.0 / 3.0
MIN_ASPECT = 0.3
ATTEMPTS = 10


def erase(image, probability, seed=None):
    """A float HWC image with (with `probability`) one rectangle of it set to noise."""
    apply_seed, area_seed, aspect_seed, top_seed, left_seed, noise_seed = (
        random_draws.split(seed, 6))
    shape = tf.shape(image)
    height, width = shape[0], shape[1]
    areas = tf.random.stateless_uniform(
        [ATTEMPTS], area_seed, MIN_AREA, MAX_AREA) * tf.cast(height * width, tf.float32)
    aspects = tf.exp(tf.random.stateless_uniform(
        [ATTEMPTS], aspect_seed, math.log(MIN_ASPECT), -math.log(MIN_ASPECT)))
    heights = tf.cast(tf.round(tf.sqrt(areas * aspects)), tf.int32)
    widths = tf.cast(tf.round(tf.sqrt(areas / aspects)), tf.int32)
    fits = (heights < height) & (widths < width)
    first_fit = tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int32)
    erase_height, erase_width = heights[first_fit], widths[first_fit]
    # Bounds kept valid when nothing fits (then nothing is erased anyway).
    top = random_draws.uniform(top_seed, 0, tf.maximum(height - erase_height + 1, 1),
                               dtype=tf.int32)
    left = random_draws.uniform(left_seed, 0, tf.maximum(width - erase_width + 1, 1),
                                dtype=tf.int32)
    chosen = random_draws.uniform(apply_seed, 0.0, 1.0) < probability

    def erase_rectangle():
        # Noise for the rectangle only: drawing it for the whole image cost more than
        # RandAugment (measured, inception at 224).
        noise = tf.random.stateless_normal(
            tf.stack([erase_height, erase_width, shape[2]]), noise_seed, dtype=image.dtype)
        placed = tf.pad(noise, [[top, height - top - erase_height],
                                [left, width - left - erase_width], [0, 0]])
        rows = tf.range(height)[:, tf.newaxis, tf.newaxis]
        columns = tf.range(width)[tf.newaxis, :, tf.newaxis]
        inside = ((rows >= top) & (rows < top + erase_height)
                  & (columns >= left) & (columns < left + erase_width))
        return tf.where(inside, placed, image)

    erased = tf.cond(chosen & tf.reduce_any(fits), erase_rectangle, lambda: image)
    erased.set_shape(image.shape)
    return erased
