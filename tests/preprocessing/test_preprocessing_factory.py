"""Factory, registry, goldens and tf.data use, for every preprocessing module."""
import numpy as np
import pytest
import tensorflow as tf

from core.errors import UsageError
from preprocessing import preprocessing_factory
from preprocessing import registry

FAMILIES = ["cifarnet", "convnext", "convnext_v2", "dinov2", "efficientnet", "efficientnet_v2",
            "inception", "lenet", "mobilenet_v4", "mobilenet_v4_conv_small", "vgg", "vit"]
# Families that are another's function with other values, registered in its module.
MODULE_OF = {"convnext_v2": "convnext", "dinov2": "vit",
             "mobilenet_v4_conv_small": "mobilenet_v4"}

# (name, output size, golden file of TF-Slim's eval path on image_0.png)
GOLDENS = [
    ("lenet", 28, "lenet_28_0.npy"),
    ("cifarnet", 32, "cifarnet_32_0.npy"),
    ("inception", 299, "inception_299_0.npy"),
    ("vgg", 224, "vgg_224_0.npy"),
]
# Families without a TF-Slim golden (their own tests check them against their releases).
MODULE_SIZES = [(name, size) for name, size, _ in GOLDENS] + [
    ("convnext", 64), ("efficientnet", 64), ("efficientnet_v2", 64)]


@pytest.fixture
def image_path(test_data_dir):
    return str(test_data_dir / "preprocessing" / "image_0.png")


@pytest.fixture
def image(image_path):
    return tf.io.decode_png(tf.io.read_file(image_path))


def test_the_registry_is_keyed_by_family():
    assert preprocessing_factory.available_names() == FAMILIES


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_is_its_module(family):
    registered = registry.lookup(family)
    module = MODULE_OF.get(family, family)
    assert registered.__module__ == f"preprocessing.{module}_preprocessing"
    assert preprocessing_factory.is_available(family)


def test_unknown_name_is_a_usage_error_listing_valid_names():
    assert not preprocessing_factory.is_available("resnet_v3_50")
    with pytest.raises(UsageError) as error:
        preprocessing_factory.get_preprocessing("resnet_v3_50")
    message = str(error.value)
    assert "'resnet_v3_50'" in message and "\n" not in message
    for name in FAMILIES:
        assert name in message


def test_registering_a_name_twice_fails():
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("lenet")(lambda *args, **kwargs: None)
    assert registry.lookup("lenet").__module__ == "preprocessing.lenet_preprocessing"


@pytest.mark.parametrize("name,size,golden", GOLDENS)
def test_eval_matches_slim_golden(name, size, golden, image, test_data_dir):
    expected = np.load(test_data_dir / "preprocessing" / golden)
    output = preprocessing_factory.get_preprocessing(name)(image, size, size)
    assert output.dtype == tf.float32
    assert output.shape == expected.shape
    np.testing.assert_allclose(output.numpy(), expected, rtol=0, atol=1e-3)


def test_kwargs_reach_the_module(image):
    # resize_side_min=400 zooms in, so the 224 crop differs from the default.
    fn = preprocessing_factory.get_preprocessing("vgg")
    default = fn(image, 224, 224).numpy()
    zoomed = fn(image, 224, 224, resize_side_min=400).numpy()
    assert zoomed.shape == (224, 224, 3)
    assert np.abs(zoomed - default).max() > 10


@pytest.mark.parametrize("is_training", [False, True])
@pytest.mark.parametrize("name,size", MODULE_SIZES)
def test_grayscale_gives_one_channel(name, size, is_training, image):
    fn = preprocessing_factory.get_preprocessing(name, is_training, use_grayscale=True)
    output = fn(image, size, size)
    assert output.shape == (size, size, 1)
    assert output.dtype == tf.float32


@pytest.mark.parametrize("is_training", [False, True])
@pytest.mark.parametrize("name,size", MODULE_SIZES)
def test_works_in_tf_data_map_with_static_shape(name, size, is_training, image_path):
    fn = preprocessing_factory.get_preprocessing(name, is_training)

    def load(path):
        # Unknown height and width at trace time, as with real datasets.
        return fn(tf.io.decode_png(tf.io.read_file(path), channels=3), size, size)

    dataset = tf.data.Dataset.from_tensors(image_path).repeat(2).map(load).batch(2)
    assert dataset.element_spec.shape.as_list() == [None, size, size, 3]
    batch = next(iter(dataset))
    assert batch.shape == (2, size, size, 3)
    assert np.all(np.isfinite(batch.numpy()))


@pytest.mark.parametrize("name,size,golden", GOLDENS)
def test_graph_mode_eval_matches_golden(name, size, golden, image_path, test_data_dir):
    fn = preprocessing_factory.get_preprocessing(name)
    dataset = tf.data.Dataset.from_tensors(image_path).map(
        lambda path: fn(tf.io.decode_png(tf.io.read_file(path), channels=3), size, size))
    expected = np.load(test_data_dir / "preprocessing" / golden)
    np.testing.assert_allclose(next(iter(dataset)).numpy(), expected, rtol=0, atol=1e-3)


@pytest.mark.parametrize("is_training", [False, True])
@pytest.mark.parametrize("name,size", MODULE_SIZES)
def test_grayscale_with_channels_unknown_until_run_time(name, size, is_training, image_path):
    fn = preprocessing_factory.get_preprocessing(name, is_training, use_grayscale=True)
    dataset = tf.data.Dataset.from_tensors(image_path).map(
        lambda path: fn(tf.io.decode_png(tf.io.read_file(path), channels=0), size, size))
    assert dataset.element_spec.shape.as_list() == [size, size, 1]
    assert next(iter(dataset)).shape == (size, size, 1)
