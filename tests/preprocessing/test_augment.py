"""augment_ops against their definitions on fixed images; the RandAugment and
AutoAugment policies (seeded, uint8, graph mode, every family); random erasing."""
import numpy as np
import pytest
import tensorflow as tf

from core.errors import UsageError
from preprocessing import augment_ops
from preprocessing import augment_policies
from preprocessing import preprocessing_factory
from preprocessing import random_erasing
from preprocessing.augment_policies import AugmentationConfig

FILL = augment_ops.FILL_VALUE
POLICIES = ['randaugment', 'autoaugment']
# Sizes that keep each family fast (vgg still resizes to 256..512 before its crop).
FAMILY_SIZES = [('cifarnet', 32), ('inception', 64), ('lenet', 28), ('vgg', 64)]


def _seed(k):
    return tf.constant([k, 17], tf.int64)


@pytest.fixture
def image():
    """A fixed 16x16 RGB image with every channel spanning most of [0, 255]."""
    return np.random.default_rng(0).integers(0, 256, (16, 16, 3)).astype(np.uint8)


def _blend(degenerate, image, factor):
    """PIL's enhance blend in numpy float32: clip, then truncate to uint8."""
    degenerate = np.asarray(degenerate, np.float32)
    blended = degenerate + np.float32(factor) * (image.astype(np.float32) - degenerate)
    return np.clip(blended, 0, 255).astype(np.uint8)


def test_invert_is_255_minus_x(image):
    np.testing.assert_array_equal(augment_ops.invert(tf.constant(image)), 255 - image)


@pytest.mark.parametrize('threshold', [0, 100, 256])
def test_solarize_flips_exactly_the_pixels_at_or_above_the_threshold(image, threshold):
    expected = np.where(image >= threshold, 255 - image, image)
    np.testing.assert_array_equal(augment_ops.solarize(tf.constant(image), threshold),
                                  expected)


def test_solarize_add_adds_below_128_clipped(image):
    expected = np.where(image < 128, np.minimum(image.astype(int) + 100, 255), image)
    np.testing.assert_array_equal(augment_ops.solarize_add(tf.constant(image), 100),
                                  expected)


@pytest.mark.parametrize('bits, mask', [(4, 0b11110000), (2, 0b11000000), (1, 0b10000000),
                                        (0, 0b10000000), (8, 0b11111111)])
def test_posterize_keeps_the_top_bits(image, bits, mask):
    np.testing.assert_array_equal(augment_ops.posterize(tf.constant(image), bits),
                                  image & mask)


@pytest.mark.parametrize('factor', [0.0, 0.3, 1.0, 1.9])
def test_brightness_blends_with_black(image, factor):
    np.testing.assert_array_equal(augment_ops.brightness(tf.constant(image), factor),
                                  _blend(np.zeros_like(image), image, factor))


@pytest.mark.parametrize('factor', [0.0, 0.5, 1.0, 1.9])
def test_color_blends_with_the_grey_image(image, factor):
    grey = tf.image.rgb_to_grayscale(tf.constant(image)).numpy()
    luma = image.astype(np.float32) @ np.array([0.2989, 0.587, 0.114], np.float32)
    assert np.abs(grey[..., 0] - luma).max() <= 1
    np.testing.assert_array_equal(augment_ops.color(tf.constant(image), factor),
                                  _blend(np.repeat(grey, 3, axis=-1), image, factor))


@pytest.mark.parametrize('factor', [0.0, 0.5, 1.9])
def test_contrast_blends_with_the_mean_grey(image, factor):
    grey = tf.image.rgb_to_grayscale(tf.constant(image)).numpy()
    mean = np.floor(grey.astype(np.float32).mean() + 0.5)
    np.testing.assert_array_equal(augment_ops.contrast(tf.constant(image), factor),
                                  _blend(np.full(image.shape, mean), image, factor))


@pytest.mark.parametrize('factor', [0.0, 0.5, 1.9])
def test_sharpness_blends_with_pils_smooth_filter_inside_the_border(image, factor):
    pixels = image.astype(np.float32)
    neighbours = sum(pixels[1 + dy:15 + dy, 1 + dx:15 + dx]
                     for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    smoothed = image.copy()
    smoothed[1:-1, 1:-1] = np.clip((neighbours + 4 * pixels[1:-1, 1:-1]) / 13, 0,
                                   255).astype(np.uint8)
    output = augment_ops.sharpness(tf.constant(image), factor).numpy()
    # Float sums in another order may land on the other side of an integer.
    assert np.abs(output.astype(int) - _blend(smoothed, image, factor)).max() <= 1
    np.testing.assert_array_equal(output[0], image[0])  # the border is the image's own


def test_rotate_by_90_degrees_is_rot90(image):
    rotated = augment_ops.rotate(tf.constant(image), 90.0).numpy()
    np.testing.assert_array_equal(rotated, np.rot90(image))
    np.testing.assert_array_equal(augment_ops.rotate(tf.constant(image), -90.0),
                                  np.rot90(image, k=-1))


def test_rotate_fills_the_uncovered_corners_with_grey():
    rotated = augment_ops.rotate(tf.zeros([16, 16, 3], tf.uint8), 45.0).numpy()
    assert (rotated[0, 0] == FILL).all() and (rotated[8, 8] == 0).all()


@pytest.mark.parametrize('pixels', [3, -3])
def test_translate_shifts_by_the_pixels_with_grey_fill(image, pixels):
    moved_x = augment_ops.translate_x(tf.constant(image), float(pixels)).numpy()
    moved_y = augment_ops.translate_y(tf.constant(image), float(pixels)).numpy()
    expected_x = np.full_like(image, FILL)
    expected_y = np.full_like(image, FILL)
    if pixels > 0:  # the content moves left (up), as PIL's affine (1, 0, pixels, ...)
        expected_x[:, :-pixels] = image[:, pixels:]
        expected_y[:-pixels] = image[pixels:]
    else:
        expected_x[:, -pixels:] = image[:, :pixels]
        expected_y[-pixels:] = image[:pixels]
    np.testing.assert_array_equal(moved_x, expected_x)
    np.testing.assert_array_equal(moved_y, expected_y)


def test_shear_maps_each_pixel_to_its_sheared_source(image):
    sheared_x = augment_ops.shear_x(tf.constant(image), 1.0).numpy()
    sheared_y = augment_ops.shear_y(tf.constant(image), 1.0).numpy()
    for y in range(16):
        for x in range(16):
            # Output (x, y) takes input (x + y, y), resp. (x, x + y), or grey outside.
            expected_x = image[y, x + y] if x + y < 16 else [FILL] * 3
            expected_y = image[x + y, x] if x + y < 16 else [FILL] * 3
            np.testing.assert_array_equal(sheared_x[y, x], expected_x)
            np.testing.assert_array_equal(sheared_y[y, x], expected_y)


def test_equalize_on_a_known_histogram():
    # 1024 pixels: 256 at 10, 256 at 20, 512 at 30. PIL's step is (1024 - 512) // 255
    # = 2, and the table (step // 2 + pixels below the value) // step: 0, 128, 256 -> 255.
    channel = np.repeat(np.array([10, 20, 30, 30], np.uint8), 256).reshape(32, 32)
    flat = np.full((32, 32), 77, np.uint8)  # one value: step 0, left alone
    image = np.stack([channel, flat, channel[::-1]], axis=-1)
    output = augment_ops.equalize(tf.constant(image)).numpy()
    lookup = {10: 0, 20: 128, 30: 255}
    np.testing.assert_array_equal(output[..., 0], np.vectorize(lookup.get)(channel))
    np.testing.assert_array_equal(output[..., 1], flat)
    np.testing.assert_array_equal(output[..., 2], output[..., 0][::-1])


def test_auto_contrast_stretches_each_channel_to_the_full_range():
    ramp = np.linspace(50, 150, 256).astype(np.uint8).reshape(16, 16)
    image = np.stack([ramp, np.full_like(ramp, 9), 255 - ramp], axis=-1)
    output = augment_ops.auto_contrast(tf.constant(image)).numpy()
    expected = np.clip(ramp.astype(np.float32) * np.float32(2.55) - np.float32(127.5),
                       0, 255).astype(np.uint8)
    assert np.abs(output[..., 0].astype(int) - expected).max() <= 1
    assert (output[..., 0].min(), output[..., 0].max()) == (0, 255)
    np.testing.assert_array_equal(output[..., 1], 9)  # a flat channel is left alone
    assert (output[..., 2].min(), output[..., 2].max()) == (0, 255)


@pytest.mark.parametrize('center, rows, columns', [((5, 6), (2, 8), (3, 9)),
                                                   ((0, 15), (0, 3), (12, 16))])
def test_cutout_fills_a_square_of_twice_the_half_size(center, rows, columns):
    image = np.full((16, 16, 3), 7, np.uint8)
    output = augment_ops.cutout(tf.constant(image), 3, *center).numpy()
    expected = image.copy()
    expected[rows[0]:rows[1], columns[0]:columns[1]] = FILL
    np.testing.assert_array_equal(output, expected)


def test_one_channel_images_work_with_every_op():
    grey = tf.constant(np.random.default_rng(1).integers(0, 256, (16, 16, 1)), tf.uint8)
    for name in augment_policies.OP_NAMES:
        output = augment_policies.apply_op(name, grey, 7, _seed(0))
        assert output.dtype == tf.uint8 and output.shape == (16, 16, 1), name


def test_magnitudes_map_to_model_gardens_parameters(image):
    def op(name, magnitude, seed=0, size_image=image):
        return augment_policies.apply_op(name, tf.constant(size_image), magnitude,
                                         _seed(seed)).numpy()

    np.testing.assert_array_equal(op('Solarize', 5), augment_ops.solarize(image, 128))
    np.testing.assert_array_equal(op('Posterize', 10), augment_ops.posterize(image, 4))
    np.testing.assert_array_equal(op('SolarizeAdd', 10),
                                  augment_ops.solarize_add(image, 110))
    np.testing.assert_array_equal(op('Brightness', 5), augment_ops.brightness(image, 1.0))
    np.testing.assert_array_equal(op('Color', 0), augment_ops.color(image, 0.1))
    # Either direction, by the seed: 30 degrees at magnitude 10.
    rotations = {op('Rotate', 10, seed).tobytes() for seed in range(8)}
    assert rotations == {augment_ops.rotate(image, d).numpy().tobytes() for d in (30, -30)}
    # Translate: 100 pixels at magnitude 10 on a 224 image, scaled to a shorter side.
    big = np.random.default_rng(2).integers(0, 256, (224, 224, 3)).astype(np.uint8)
    moved = {op('TranslateX', 5, seed, big).tobytes() for seed in range(8)}
    assert moved == {augment_ops.translate_x(big, p).numpy().tobytes() for p in (50, -50)}
    assert augment_policies._scaled_pixels(100.0, image) == 100.0 * (16 / 224)
    # Magnitude 0 still acts: Brightness has factor 0.1, near black.
    assert op('Brightness', 0).max() <= 26


def test_config_errors_name_the_fix():
    for kwargs, fragment in [({'randaugment_magnitude': 11}, 'pass a value in [0, 10]'),
                             ({'randaugment_layers': 0}, 'pass at least 1'),
                             ({'random_erase_prob': 1.5}, 'pass a value in [0, 1]'),
                             ({'augmentation': 'trivial'},
                              'none, randaugment, autoaugment')]:
        with pytest.raises(UsageError, match=fragment.replace('[', r'\[')) as error:
            AugmentationConfig(**kwargs)
        assert '\n' not in str(error.value)


def _policy(name):
    return augment_policies.policy_fn(AugmentationConfig(augmentation=name))


@pytest.mark.parametrize('name', POLICIES)
def test_policies_are_seeded_and_stay_uint8(name, image):
    policy = _policy(name)
    first = [policy(tf.constant(image), _seed(k)).numpy() for k in range(6)]
    again = [policy(tf.constant(image), _seed(k)).numpy() for k in range(6)]
    for output, repeated in zip(first, again):
        np.testing.assert_array_equal(output, repeated)
        assert output.dtype == np.uint8 and output.shape == image.shape
    assert len({output.tobytes() for output in first}) > 1  # seeds choose differently


@pytest.mark.parametrize('name', POLICIES)
def test_policies_run_in_tf_data_map_in_graph_mode(name, image):
    policy = _policy(name)
    dataset = tf.data.Dataset.range(4).map(
        lambda k: policy(tf.constant(image), tf.stack([k, tf.constant(5, tf.int64)])))
    assert dataset.element_spec.shape == image.shape
    assert dataset.element_spec.dtype == tf.uint8
    eager = [policy(tf.constant(image), tf.constant([k, 5], tf.int64)).numpy()
             for k in range(4)]
    for output, expected in zip(dataset, eager):
        np.testing.assert_array_equal(output, expected)


def test_policies_work_on_images_whose_size_is_known_only_at_run_time(image):
    for name in POLICIES:
        policy = _policy(name)
        traced = tf.function(policy, input_signature=[
            tf.TensorSpec([None, None, 3], tf.uint8), tf.TensorSpec([2], tf.int64)])
        for k in range(3):
            np.testing.assert_array_equal(traced(image, _seed(k)),
                                          policy(tf.constant(image), _seed(k)))


@pytest.fixture(scope='module')
def photo():
    rng = np.random.default_rng(3)
    return rng.integers(0, 256, (48, 40, 3)).astype(np.uint8)


# In `make test` each family runs one policy and each policy two families; every pair
# in test-slow.
@pytest.mark.parametrize('family, size, name', [
    pytest.param(family, size, name,
                 marks=() if (i + j) % len(POLICIES) == 0 else pytest.mark.slow)
    for i, (family, size) in enumerate(FAMILY_SIZES) for j, name in enumerate(POLICIES)])
def test_every_family_runs_each_policy_in_tf_data(family, size, name, photo):
    augmentation = AugmentationConfig(augmentation=name, random_erase_prob=0.5)
    preprocess = preprocessing_factory.get_preprocessing(family, is_training=True,
                                                         augmentation=augmentation)
    dataset = tf.data.Dataset.range(3).map(
        lambda k: preprocess(tf.constant(photo), size, size,
                             seed=tf.stack([k, tf.constant(1, tf.int64)])))
    assert dataset.element_spec.shape == (size, size, 3)
    first, again = list(dataset), list(dataset)
    for output, repeated in zip(first, again):
        assert np.all(np.isfinite(output))
        np.testing.assert_array_equal(output, repeated)


@pytest.mark.parametrize('family, size', FAMILY_SIZES)
def test_augmentation_none_is_the_familys_own_preprocessing(family, size, photo):
    plain = preprocessing_factory.get_preprocessing(family, is_training=True)
    none = preprocessing_factory.get_preprocessing(family, is_training=True,
                                                   augmentation=AugmentationConfig())
    np.testing.assert_array_equal(plain(photo, size, size, seed=_seed(4)),
                                  none(photo, size, size, seed=_seed(4)))


def test_evaluation_never_augments(photo):
    augmentation = AugmentationConfig(augmentation='randaugment', random_erase_prob=1.0)
    evaluate = preprocessing_factory.get_preprocessing('cifarnet',
                                                       augmentation=augmentation)
    np.testing.assert_array_equal(evaluate(photo, 32, 32),
                                  preprocessing_factory.get_preprocessing('cifarnet')(
                                      photo, 32, 32))


def test_grayscale_training_runs_the_policies_on_one_channel(photo):
    for name in POLICIES:
        preprocess = preprocessing_factory.get_preprocessing(
            'cifarnet', is_training=True, use_grayscale=True,
            augmentation=AugmentationConfig(augmentation=name))
        assert preprocess(photo, 32, 32, seed=_seed(0)).shape == (32, 32, 1)


def _erased(image, output):
    """(rows, columns) of the changed pixels' bounding box; asserts it is all changed."""
    changed = np.any(output != image, axis=-1)
    rows, columns = np.nonzero(changed.any(axis=1))[0], np.nonzero(changed.any(axis=0))[0]
    box = changed[rows[0]:rows[-1] + 1, columns[0]:columns[-1] + 1]
    assert box.all(), 'the erased pixels form one rectangle'
    return len(rows), len(columns)


def test_random_erasing_erases_one_rectangle_of_the_stated_area():
    image = np.full((40, 50, 3), 5.0, np.float32)
    for k in range(20):
        output = random_erasing.erase(tf.constant(image), 1.0, _seed(k)).numpy()
        height, width = _erased(image, output)
        assert height < 40 and width < 50
        # Area 2% to 1/3 of the image, each side rounded.
        assert 0.02 * 2000 * 0.6 <= height * width <= 2000 / 3 * 1.2
        assert 0.3 * 0.6 <= height / width <= 1 / 0.3 * 1.7
        erased = output[output != 5.0]
        assert abs(erased.mean()) < 0.5 and 0.6 < erased.std() < 1.4  # normal noise


def test_random_erasing_at_probability_0_changes_nothing():
    image = np.random.default_rng(4).normal(size=(40, 50, 3)).astype(np.float32)
    for k in range(5):
        output = random_erasing.erase(tf.constant(image), 0.0, _seed(k))
        np.testing.assert_array_equal(output, image)


def test_random_erasing_is_seeded():
    image = tf.zeros([32, 32, 3])
    outputs = [random_erasing.erase(image, 0.5, _seed(k)).numpy() for k in range(8)]
    again = [random_erasing.erase(image, 0.5, _seed(k)).numpy() for k in range(8)]
    for output, repeated in zip(outputs, again):
        np.testing.assert_array_equal(output, repeated)
    erased = [bool(np.any(output)) for output in outputs]
    assert any(erased) and not all(erased)
