"""convnext_preprocessing: the release's random resized crop and flip, its resize-and-
centre-crop evaluation, ImageNet normalisation as Keras's ConvNeXt applications do."""
import numpy as np
import tensorflow as tf

from preprocessing import convnext_preprocessing

MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255


def _ramp(height=120, width=160):
    """Brightening left to right in every channel: flips and crops stay visible."""
    row = np.linspace(0, 255, width).round().astype(np.uint8)
    return np.repeat(np.tile(row[None, :, None], (height, 1, 1)), 3, axis=2)


def _train(image, seed, size=64, **kwargs):
    return convnext_preprocessing.preprocess_image(
        tf.constant(image), size, size, is_training=True,
        seed=tf.constant([seed, 7]), **kwargs).numpy()


def test_normalisation_is_keras_convnext_include_preprocessing():
    import keras
    model = keras.applications.ConvNeXtTiny(weights=None, include_preprocessing=True,
                                            input_shape=(32, 32, 3))
    keras_normalise = model.get_layer('convnext_tiny_prestem_normalization')
    pixels = np.random.default_rng(0).uniform(0, 255, (2, 5, 5, 3)).astype(np.float32)
    np.testing.assert_allclose(convnext_preprocessing.normalise(pixels),
                               keras_normalise(pixels), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(convnext_preprocessing.normalise(pixels),
                               (pixels - MEAN) / STD, rtol=1e-5, atol=1e-5)
    keras.backend.clear_session()


def test_eval_resizes_the_shorter_side_then_crops_the_centre():
    # 224 / 0.875 = 256: a 200x300 image becomes 256x384, then its central 224x224.
    image = np.random.default_rng(1).integers(0, 256, (200, 300, 3), dtype=np.uint8)
    output = convnext_preprocessing.preprocess_image(tf.constant(image), 224, 224)
    assert output.shape == (224, 224, 3) and output.dtype == tf.float32
    resized = tf.image.resize(tf.cast(image, tf.float32), [256, 384], method='bicubic',
                              antialias=True)
    expected = (np.clip(resized.numpy(), 0, 255)[16:240, 80:304] - MEAN) / STD
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-4)


def test_eval_of_a_square_image_keeps_the_central_seven_eighths():
    # An image already at 256: no resize (up to rounding), a 16-pixel margin cut.
    image = np.random.default_rng(2).integers(0, 256, (256, 256, 3), dtype=np.uint8)
    output = convnext_preprocessing.preprocess_image(tf.constant(image), 224, 224).numpy()
    np.testing.assert_allclose(output, (image[16:240, 16:240] - MEAN) / STD, atol=1e-3)


def test_train_output_shape_range_and_reproducibility():
    image = _ramp()
    output = _train(image, 3)
    assert output.shape == (64, 64, 3) and output.dtype == np.float32
    pixels = output * STD + MEAN
    assert pixels.min() >= -1e-3 and pixels.max() <= 255 + 1e-3  # clipped bicubic
    np.testing.assert_array_equal(_train(image, 3), output)
    assert not np.array_equal(_train(image, 4), output)


def test_train_flips_and_crops_vary_with_the_seed():
    flipped, spans = [], []
    for seed in range(20):
        row = _train(_ramp(), seed).mean(axis=(0, 2))
        flipped.append(row[:8].mean() > row[-8:].mean())
        spans.append(abs(row[-1] - row[0]))
    assert any(flipped) and not all(flipped)
    # The whole ramp spans 255 / 0.226 ~ 1130 normalised; a crop covers less of it.
    assert min(spans) < 0.7 * max(spans)


def test_crop_areas_follow_the_release_range():
    # The sampled windows of a 100x100 image: 8-100 % of the area, aspect 3/4..4/3.
    areas, aspects = [], []
    for seed in range(40):
        begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
            [100, 100, 3], tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
            seed=[seed, 1], min_object_covered=0.0,
            aspect_ratio_range=convnext_preprocessing.ASPECT_RATIO_RANGE,
            area_range=convnext_preprocessing.AREA_RANGE,
            max_attempts=convnext_preprocessing.CROP_ATTEMPTS,
            use_image_if_no_bounding_boxes=True)
        height, width = size.numpy()[:2]
        areas.append(height * width / 1e4)
        aspects.append(width / height)
    assert min(areas) >= 0.07 and max(areas) <= 1.0 and min(areas) < 0.4
    assert min(aspects) >= 0.7 and max(aspects) <= 1.4


def test_float_input_is_taken_as_tf_image_floats():
    as_uint8 = convnext_preprocessing.preprocess_image(tf.constant(_ramp(40, 50)), 32, 32)
    as_float = convnext_preprocessing.preprocess_image(
        tf.image.convert_image_dtype(tf.constant(_ramp(40, 50)), tf.float32), 32, 32)
    np.testing.assert_allclose(as_float, as_uint8, rtol=1e-5, atol=1e-4)


def test_convnext_v2_family_is_timms_convnextv2_pretrained_cfg():
    # timm's convnextv2_*.fcmae_ft_in1k: bicubic, crop_pct 0.875 at 224, ImageNet's
    # mean and std, which is this family: a 200x300 image becomes 256x384, then its centre.
    from preprocessing import preprocessing_factory
    image = np.random.default_rng(5).integers(0, 256, (200, 300, 3), dtype=np.uint8)
    output = preprocessing_factory.get_preprocessing('convnext_v2')(tf.constant(image),
                                                                   224, 224)
    resized = tf.image.resize(tf.cast(image, tf.float32), [256, 384], method='bicubic',
                              antialias=True)
    expected = (np.clip(resized.numpy(), 0, 255)[16:240, 80:304] - MEAN) / STD
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-4)
