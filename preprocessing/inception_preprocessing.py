"""Inception preprocessing, as TF-Slim's inception_preprocessing (outputs in [-1, 1])."""
import tensorflow as tf

from preprocessing import image_ops
from preprocessing import random_draws
from preprocessing import registry

CENTRAL_FRACTION = 0.875
BRIGHTNESS_MAX_DELTA = 32.0 / 255.0
SATURATION_RANGE = (0.5, 1.5)
HUE_MAX_DELTA = 0.2
CONTRAST_RANGE = (0.5, 1.5)
NUM_COLOR_ORDERINGS = 4


def _tf1_resize(method):
    """TF1 `tf.image.resize_images` method 0..3 (bilinear, nearest, bicubic, area)."""
    def resize(image, height, width):
        images = tf.expand_dims(image, 0)
        size = tf.cast(tf.stack([height, width]), tf.int32)
        if method == 0:
            resized = tf.raw_ops.ResizeBilinear(
                images=images, size=size, align_corners=False, half_pixel_centers=False)
        elif method == 1:
            resized = tf.raw_ops.ResizeNearestNeighbor(
                images=images, size=size, align_corners=False, half_pixel_centers=False)
        elif method == 2:
            resized = tf.raw_ops.ResizeBicubic(
                images=images, size=size, align_corners=False, half_pixel_centers=False)
        else:
            resized = tf.raw_ops.ResizeArea(images=images, size=size, align_corners=False)
        return tf.squeeze(resized, [0])
    return resize


_RESIZE_METHODS = [_tf1_resize(method) for method in range(4)]


def distort_color(image, color_ordering=0, fast_mode=True, seed=None):
    """Random colour jitter of an RGB image in [0, 1], in one of 4 orders; clipped to [0, 1].

    Each distortion draws from its own part of `seed`, whatever the order."""
    brightness_seed, saturation_seed, hue_seed, contrast_seed = random_draws.split(seed, 4)

    def brightness(x):
        return tf.image.stateless_random_brightness(x, BRIGHTNESS_MAX_DELTA, brightness_seed)

    def saturation(x):
        return tf.image.stateless_random_saturation(x, *SATURATION_RANGE, saturation_seed)

    def hue(x):
        return tf.image.stateless_random_hue(x, HUE_MAX_DELTA, hue_seed)

    def contrast(x):
        return tf.image.stateless_random_contrast(x, *CONTRAST_RANGE, contrast_seed)

    if fast_mode:
        orderings = [(brightness, saturation), (saturation, brightness)]
    else:
        orderings = [(brightness, saturation, hue, contrast),
                     (saturation, brightness, contrast, hue),
                     (contrast, hue, brightness, saturation),
                     (hue, saturation, contrast, brightness)]
    if not 0 <= color_ordering < len(orderings):
        raise ValueError(f"color_ordering must be in [0, {len(orderings) - 1}], "
                         f"got {color_ordering}.")
    for distortion in orderings[color_ordering]:
        image = distortion(image)
    # The random_* ops do not clip.
    return tf.clip_by_value(image, 0.0, 1.0)


def _fast_mode_draws(flip_seed, ordering_seed, color_seed):
    """The draws of the flip and of distort_color in fast mode, as those ops make them:
    (flip, brightness delta, saturation factor, saturation first)."""
    flip = tf.random.stateless_uniform([], flip_seed) < 0.5
    saturation_first = random_draws.uniform(ordering_seed, 0, 2, dtype=tf.int32) == 1
    brightness_seed, saturation_seed, _, _ = random_draws.split(color_seed, 4)
    delta = random_draws.uniform(brightness_seed, -BRIGHTNESS_MAX_DELTA, BRIGHTNESS_MAX_DELTA)
    factor = random_draws.uniform(saturation_seed, *SATURATION_RANGE)
    return flip, delta, factor, saturation_first


@tf.function(jit_compile=True, autograph=False)
def _fast_mode_jitter(image, flip, brightness_delta, saturation_factor, saturation_first):
    """Flip, then distort_color in fast mode (brightness and saturation in the drawn
    order, clipped), scaled to [-1, 1]: one fused XLA loop over the image. As separate
    ops these passes (the saturation kernel above all) cost more CPU than the decode."""
    image = tf.where(flip, tf.reverse(image, [1]), image)
    before = tf.where(saturation_first, 0.0, brightness_delta)
    image = image_ops.adjust_saturation(image + before, saturation_factor)
    image = image + (brightness_delta - before)
    return (tf.clip_by_value(image, 0.0, 1.0) - 0.5) * 2.0


def _sample_crop_window(image_shape, bbox, seed, min_object_covered=0.1,
                        aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0),
                        max_attempts=100):
    """(begin, size) of a random crop covering part of `bbox`; whole image if none fits."""
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        image_shape,
        bounding_boxes=bbox,
        seed=seed,
        min_object_covered=min_object_covered,
        aspect_ratio_range=aspect_ratio_range,
        area_range=area_range,
        max_attempts=max_attempts,
        use_image_if_no_bounding_boxes=True)
    return begin, size


def distorted_bounding_box_crop(image, bbox, seed=None, **kwargs):
    """Random crop covering part of `bbox`; the whole image if no box is found."""
    begin, size = _sample_crop_window(tf.shape(image), bbox, random_draws.seed_or_fresh(seed),
                                      **kwargs)
    return tf.slice(image, begin, size)


def decode_and_crop(encoded, bbox, seed=None):
    """Decodes only the random crop of a JPEG (tf.image.decode_and_crop_jpeg: no full-size
    decode); other formats are decoded whole, then cropped (the same window). uint8 RGB."""
    seed = random_draws.seed_or_fresh(seed)

    def crop_jpeg():
        begin, size = _sample_crop_window(tf.image.extract_jpeg_shape(encoded), bbox, seed)
        window = tf.stack([begin[0], begin[1], size[0], size[1]])
        return tf.image.decode_and_crop_jpeg(encoded, window, channels=3)

    def crop_other():
        image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
        begin, size = _sample_crop_window(tf.shape(image), bbox, seed)
        return tf.slice(image, begin, size)

    image = tf.cond(tf.io.is_jpeg(encoded), crop_jpeg, crop_other)
    image.set_shape([None, None, 3])
    return image


def _decode(encoded):
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    image.set_shape([None, None, 3])
    return image


def preprocess_for_train(image, height, width, bbox=None, fast_mode=True,
                         random_crop=True, use_grayscale=False, seed=None, augment=None):
    """Random box crop, resize, flip and colour jitter; float32 in [-1, 1].

    `image` may be encoded (a string tensor): a JPEG is then decoded only inside the crop.
    `seed`: the example's [2] seed, every random choice drawn from it (random_draws).
    `augment`: a function of the uint8 image, applied after the crop, resize and flip,
    before the colour jitter (training with --augmentation); None: TF-Slim's path.
    """
    crop_seed, resize_seed, flip_seed, ordering_seed, color_seed = random_draws.split(seed, 5)
    if bbox is None:
        bbox = tf.constant([0.0, 0.0, 1.0, 1.0], dtype=tf.float32, shape=[1, 1, 4])
    image = tf.convert_to_tensor(image)
    if image.dtype == tf.string:
        image = decode_and_crop(image, bbox, crop_seed) if random_crop else _decode(image)
        random_crop = False
    image = image_ops.to_rgb(image)
    if image.dtype != tf.float32:
        image = tf.image.convert_image_dtype(image, tf.float32)
    if random_crop:
        image = distorted_bounding_box_crop(image, bbox, crop_seed)
        image.set_shape([None, None, 3])  # tf.slice loses the channel count.

    # Fast mode always resizes bilinearly; otherwise one of 4 methods at random.
    num_resize_cases = 1 if fast_mode else len(_RESIZE_METHODS)
    image = random_draws.choice(
        resize_seed, num_resize_cases,
        lambda method: lambda: _RESIZE_METHODS[method](image, height, width))
    if fast_mode and augment is None and not use_grayscale:
        image = _fast_mode_jitter(image, *_fast_mode_draws(flip_seed, ordering_seed,
                                                           color_seed))
        return image_ops.set_output_shape(image, height, width)
    image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    if augment is not None:
        image = image_ops.augment_as_uint8(image, augment, max_value=1.0)

    num_color_cases = 1 if fast_mode else NUM_COLOR_ORDERINGS
    image = random_draws.choice(
        ordering_seed, num_color_cases,
        lambda ordering: lambda: distort_color(image, ordering, fast_mode, color_seed))
    if use_grayscale:
        image = image_ops.to_grayscale(image)
    image = (image - 0.5) * 2.0
    return image_ops.set_output_shape(image, height, width)


def preprocess_for_eval(image, height, width, central_fraction=CENTRAL_FRACTION,
                        central_crop=True, use_grayscale=False):
    """Central crop of 87.5%, TF1 bilinear resize; float32 in [-1, 1]."""
    image = tf.convert_to_tensor(image)
    if image.dtype == tf.string:
        image = _decode(image)
    image = image_ops.to_rgb(image)
    if image.dtype != tf.float32:
        image = tf.image.convert_image_dtype(image, tf.float32)
    if use_grayscale:
        image = image_ops.to_grayscale(image)
    if central_crop and central_fraction:
        image = tf.image.central_crop(image, central_fraction=central_fraction)
    if height and width:
        image = image_ops.resize_bilinear_tf1(image, height, width)
        image = image_ops.set_output_shape(image, height, width)
    return (image - 0.5) * 2.0


def preprocess_image(image, height, width, is_training=False, use_grayscale=False,
                     bbox=None, fast_mode=True, crop_image=True, seed=None, augment=None):
    """Float32 [height, width, C] in [-1, 1]; uint8 input is scaled from [0, 255].

    `image` may also be the encoded bytes (JPEG, PNG, ...), decoded here; in training a
    JPEG is decoded only inside the random crop. `bbox` [1, N, 4] (ymin, xmin, ymax,
    xmax in [0, 1]) guides the training crop, as TF-Slim's did.

    One-channel input is repeated to RGB first (the colour jitter needs 3 channels).
    """
    if is_training:
        return preprocess_for_train(image, height, width, bbox=bbox, fast_mode=fast_mode,
                                    random_crop=crop_image, use_grayscale=use_grayscale,
                                    seed=seed, augment=augment)
    return preprocess_for_eval(image, height, width, central_crop=crop_image,
                               use_grayscale=use_grayscale)


registry.register("inception")(preprocess_image)
