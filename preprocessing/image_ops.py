"""Small image helpers shared by the preprocessing modules."""
import tensorflow as tf


def static_value(value):
    """`value` as a Python int when known while tracing, else None."""
    static = tf.get_static_value(value)
    return None if static is None else int(static)


def num_channels(image):
    """The static channel count of an HWC image, or None if unknown."""
    return image.shape[-1]


def set_output_shape(image, output_height, output_width):
    """Records the known output size so batching and Keras see a static shape."""
    image.set_shape([static_value(output_height), static_value(output_width),
                     num_channels(image)])
    return image


def to_grayscale(image):
    """RGB to one channel (tf.image.rgb_to_grayscale); one-channel images pass through."""
    channels = num_channels(image)
    if channels == 1:
        return image
    if channels is not None:
        return tf.image.rgb_to_grayscale(image)
    # Channel count only known at run time (e.g. decode_png with channels=0).
    grayscale = tf.cond(tf.equal(tf.shape(image)[-1], 1),
                        lambda: image,
                        lambda: tf.image.rgb_to_grayscale(image))
    grayscale.set_shape(image.shape[:-1].concatenate([1]))
    return grayscale


def to_rgb(image):
    """Repeats a one-channel image to three channels; RGB images pass through."""
    channels = num_channels(image)
    if channels == 3:
        return image
    if channels == 1:
        return tf.image.grayscale_to_rgb(image)
    rgb = tf.cond(tf.equal(tf.shape(image)[-1], 1),
                  lambda: tf.tile(image, [1, 1, 3]),
                  lambda: image)
    rgb.set_shape(image.shape[:-1].concatenate([3]))
    return rgb


def resize_bilinear_tf1(image, height, width):
    """TF1 `resize_bilinear(align_corners=False)`: no half-pixel centres, float32 out.

    tf.image.resize uses half-pixel centres and would not match TF-Slim's outputs.
    """
    resized = tf.raw_ops.ResizeBilinear(
        images=tf.expand_dims(image, 0),
        size=tf.cast(tf.stack([height, width]), tf.int32),
        align_corners=False,
        half_pixel_centers=False)
    return tf.squeeze(resized, [0])


def resize_bicubic_tf1(image, height, width):
    """TF1 `resize_bicubic(align_corners=False)` (no half-pixel centres), float32 out: the
    official EfficientNet preprocessing's resize. Values may overshoot the input's range."""
    resized = tf.raw_ops.ResizeBicubic(
        images=tf.expand_dims(image, 0),
        size=tf.cast(tf.stack([height, width]), tf.int32),
        align_corners=False,
        half_pixel_centers=False)
    return tf.squeeze(resized, [0])


def augment_as_uint8(image, augment, max_value=255.0):
    """`augment`, a function of a uint8 image, applied to a float image whose values span
    [0, max_value] (255: pixel values; 1: tf.image's floats); float32 back, same range.

    Values are rounded to whole pixel levels first, as the augmentation ops expect.
    """
    scale = 255.0 / max_value
    pixels = tf.cast(tf.clip_by_value(tf.round(image * scale), 0.0, 255.0), tf.uint8)
    augmented = tf.cast(augment(pixels), tf.float32)
    return augmented if scale == 1.0 else augmented / scale


def adjust_saturation(image, factor):
    """tf.image.adjust_saturation of a float RGB image in closed form (no HSV round trip).

    Scaling the HSV saturation by `factor` (clipped to [0, 1]) keeps each pixel's hue
    and value, so every channel c moves to value - (value - c) * S' / S. Matches
    TensorFlow's kernel within 1e-6, also out of [0, 1] (value <= 0 means S = 0); as
    elementwise ops it fuses under XLA, which the kernel's per-pixel branches do not.
    """
    red, green, blue = tf.unstack(image, axis=-1)
    value = tf.maximum(tf.maximum(red, green), blue)
    spread = value - tf.minimum(tf.minimum(red, green), blue)
    # S' / S = min(factor, 1 / S), with S = spread / value; zero where S is.
    ratio = tf.minimum(factor * spread, value) / tf.maximum(spread, 1e-30)
    ratio = tf.where((value > 0) & (spread > 0), ratio, 0.0)
    value = value[..., tf.newaxis]
    return value - (value - image) * ratio[..., tf.newaxis]


# ImageNet's channel mean and standard deviation on [0, 255], as the EfficientNet and
# ConvNeXt releases normalise.
IMAGENET_MEAN_RGB = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STDDEV_RGB = (0.229 * 255, 0.224 * 255, 0.225 * 255)


def imagenet_normalized(image):
    return (image - tf.constant(IMAGENET_MEAN_RGB)) / tf.constant(IMAGENET_STDDEV_RGB)


def rgb_pixels(image):
    """RGB float32 in [0, 255] from uint8 (or encoded bytes, decoded whole)."""
    image = tf.convert_to_tensor(image)
    if image.dtype == tf.string:
        image = tf.io.decode_image(image, channels=3, expand_animations=False)
        image.set_shape([None, None, 3])
    image = to_rgb(image)
    if image.dtype.is_floating:  # tf.image's floats in [0, 1]
        return tf.cast(image, tf.float32) * 255.0
    return tf.cast(image, tf.float32)
