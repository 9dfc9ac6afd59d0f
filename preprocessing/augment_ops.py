"""The image operations of AutoAugment and RandAugment, on uint8 HWC images.

Each op is the PIL operation the papers name (AutoAugment, Cubuk et al. 2018,
arXiv:1805.09501; RandAugment, Cubuk et al. 2019, arXiv:1909.13719), computed as TF
Model Garden's official/vision/ops/augment.py computes it, so one magnitude gives one
image. The ops take their parameters already resolved (degrees, pixels, factors); the
magnitude -> parameter mappings and the random choices live in augment_policies.

Geometric ops sample with nearest neighbour and fill what they uncover with grey 128.
Any channel count works (1 or 3; colour ops see a one-channel image as its own grey).
Only Contrast departs from Model Garden: it blends towards the image's mean grey as PIL
does, where augment.py blends towards (pixel count / 256), a constant of the image size.
"""
import math

import tensorflow as tf

from preprocessing import image_ops

FILL_VALUE = 128
# PIL's ImageFilter.SMOOTH kernel, the blur Sharpness blends against.
_SMOOTH_KERNEL = [[1.0, 1.0, 1.0], [1.0, 5.0, 1.0], [1.0, 1.0, 1.0]]
_SMOOTH_WEIGHT = 13.0


def blend(degenerate, image, factor):
    """degenerate + factor * (image - degenerate), clipped to [0, 255], truncated to uint8.

    PIL's ImageEnhance rule: factor 0 gives `degenerate`, 1 gives `image`, above 1
    extrapolates away from `degenerate`.
    """
    degenerate = tf.cast(degenerate, tf.float32)
    blended = degenerate + factor * (tf.cast(image, tf.float32) - degenerate)
    return tf.cast(tf.clip_by_value(blended, 0.0, 255.0), tf.uint8)


def _grey(image):
    """The image's grey level, one channel (tf.image.rgb_to_grayscale for RGB)."""
    return image_ops.to_grayscale(image)


def _per_channel(image):
    """[C, H * W] int32: one row of pixel values per channel."""
    channels = tf.shape(image)[-1]
    return tf.transpose(tf.reshape(tf.cast(image, tf.int32), [-1, channels]))


def _from_per_channel(rows, like):
    """Inverse of _per_channel: [C, H * W] back to the shape of `like`, uint8."""
    return tf.reshape(tf.transpose(tf.cast(rows, tf.uint8)), tf.shape(like))


def identity(image):
    return tf.identity(image)


def auto_contrast(image):
    """Stretches each channel linearly so its darkest pixel is 0 and brightest 255;
    a flat channel is left alone."""
    low = tf.cast(tf.reduce_min(image, axis=[0, 1]), tf.float32)
    high = tf.cast(tf.reduce_max(image, axis=[0, 1]), tf.float32)
    flat = high <= low
    scale = 255.0 / tf.where(flat, 1.0, high - low)
    offset = -low * scale
    stretched = tf.cast(
        tf.clip_by_value(tf.cast(image, tf.float32) * scale + offset, 0.0, 255.0), tf.uint8)
    return tf.where(flat, image, stretched)


def equalize(image):
    """PIL's ImageOps.equalize per channel: a lookup table from the cumulative histogram,
    in steps of (pixels not of the brightest value present) // 255."""
    pixels = _per_channel(image)
    histogram = tf.math.bincount(pixels, minlength=256, maxlength=256, axis=-1)
    brightest_count = tf.gather(histogram, tf.reduce_max(pixels, axis=1), batch_dims=1)
    step = (tf.reduce_sum(histogram, axis=1) - brightest_count) // 255
    safe_step = tf.maximum(step, 1)[:, tf.newaxis]
    table = (tf.cumsum(histogram, axis=1, exclusive=True) + safe_step // 2) // safe_step
    table = tf.clip_by_value(table, 0, 255)
    equalized = tf.gather(table, pixels, batch_dims=1)
    # A step of 0 (nearly one value in the channel): PIL leaves the channel as it is.
    equalized = tf.where(tf.equal(step, 0)[:, tf.newaxis], pixels, equalized)
    return _from_per_channel(equalized, image)


def invert(image):
    return 255 - image


def posterize(image, bits):
    """Keeps the `bits` most significant bits of each value.

    0 bits keeps 1, as in Model Garden, whose shift by 8 TensorFlow clamps to 7.
    """
    bits = max(int(bits), 1)
    mask = (0xFF << (8 - bits)) & 0xFF
    return tf.bitwise.bitwise_and(image, tf.constant(mask, tf.uint8))


def solarize(image, threshold):
    """Inverts every value at or above `threshold` (0..256)."""
    return tf.where(tf.cast(image, tf.int32) < threshold, image, 255 - image)


def solarize_add(image, addition, threshold=128):
    """Adds `addition` to every value below `threshold`, clipped to [0, 255]."""
    added = tf.clip_by_value(tf.cast(image, tf.int32) + addition, 0, 255)
    return tf.where(tf.cast(image, tf.int32) < threshold, tf.cast(added, tf.uint8), image)


def color(image, factor):
    """PIL's ImageEnhance.Color: blends with the image's grey version."""
    return blend(_grey(image), image, factor)


def contrast(image, factor):
    """PIL's ImageEnhance.Contrast: blends with a flat image of the mean grey level
    (rounded, as PIL)."""
    mean = tf.math.floor(tf.reduce_mean(tf.cast(_grey(image), tf.float32)) + 0.5)
    return blend(tf.fill(tf.shape(image), mean), image, factor)


def brightness(image, factor):
    """PIL's ImageEnhance.Brightness: blends with black."""
    return blend(tf.zeros_like(image), image, factor)


def sharpness(image, factor):
    """PIL's ImageEnhance.Sharpness: blends with the image smoothed by PIL's 3x3 SMOOTH
    kernel, whose one-pixel border keeps the original values."""
    channels = tf.shape(image)[-1]
    kernel = tf.constant(_SMOOTH_KERNEL)[:, :, tf.newaxis, tf.newaxis] / _SMOOTH_WEIGHT
    kernel = tf.tile(kernel, tf.stack([1, 1, channels, 1]))
    smoothed = tf.nn.depthwise_conv2d(tf.cast(image, tf.float32)[tf.newaxis], kernel,
                                      strides=[1, 1, 1, 1], padding='VALID')[0]
    smoothed = tf.cast(tf.clip_by_value(smoothed, 0.0, 255.0), tf.uint8)
    inside = tf.pad(tf.ones_like(smoothed, tf.bool), [[1, 1], [1, 1], [0, 0]])
    degenerate = tf.where(inside, tf.pad(smoothed, [[1, 1], [1, 1], [0, 0]]), image)
    return blend(degenerate, image, factor)


def _transform(image, matrix):
    """Output pixel (x, y) takes input pixel (a0 x + a1 y + a2, b0 x + b1 y + b2),
    matrix = [a0, a1, a2, b0, b1, b2]; nearest neighbour, FILL_VALUE outside."""
    matrix = tf.cast(tf.stack(list(matrix) + [0.0, 0.0]), tf.float32)
    transformed = tf.raw_ops.ImageProjectiveTransformV3(
        images=image[tf.newaxis], transforms=matrix[tf.newaxis],
        output_shape=tf.shape(image)[:2], fill_value=tf.constant(FILL_VALUE, tf.float32),
        interpolation='NEAREST', fill_mode='CONSTANT')
    transformed = transformed[0]
    transformed.set_shape(image.shape)
    return transformed


def rotate(image, degrees):
    """Rotates about the image centre, counter-clockwise for positive degrees."""
    radians = tf.cast(degrees, tf.float32) * (math.pi / 180.0)
    height = tf.cast(tf.shape(image)[0] - 1, tf.float32)
    width = tf.cast(tf.shape(image)[1] - 1, tf.float32)
    cos, sin = tf.cos(radians), tf.sin(radians)
    # The inverse rotation, mapping the centre to itself.
    x_offset = (width - (cos * width - sin * height)) / 2.0
    y_offset = (height - (sin * width + cos * height)) / 2.0
    return _transform(image, [cos, -sin, x_offset, sin, cos, y_offset])


def shear_x(image, level):
    """Output (x, y) takes input (x + level * y, y)."""
    return _transform(image, [1.0, level, 0.0, 0.0, 1.0, 0.0])


def shear_y(image, level):
    """Output (x, y) takes input (x, level * x + y)."""
    return _transform(image, [1.0, 0.0, 0.0, level, 1.0, 0.0])


def translate_x(image, pixels):
    """Moves the content `pixels` to the left (to the right when negative), as PIL's
    affine transform (1, 0, pixels, 0, 1, 0)."""
    return _transform(image, [1.0, 0.0, pixels, 0.0, 1.0, 0.0])


def translate_y(image, pixels):
    """Moves the content `pixels` up (down when negative)."""
    return _transform(image, [1.0, 0.0, 0.0, 0.0, 1.0, pixels])


def cutout(image, half_size, center_y, center_x):
    """Fills the square of side 2 * half_size centred at (center_y, center_x), cut by the
    image's borders, with FILL_VALUE (DeVries and Taylor 2017, arXiv:1708.04552)."""
    rows = tf.range(tf.shape(image)[0])[:, tf.newaxis, tf.newaxis]
    columns = tf.range(tf.shape(image)[1])[tf.newaxis, :, tf.newaxis]
    inside = ((rows >= center_y - half_size) & (rows < center_y + half_size)
              & (columns >= center_x - half_size) & (columns < center_x + half_size))
    return tf.where(inside, tf.constant(FILL_VALUE, image.dtype), image)
