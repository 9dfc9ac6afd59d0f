"""mobilenet_v4_preprocessing: timm's pretrained_cfg of MobileNetV4's default weights
(bicubic, ImageNet's mean and std, crop_pct 0.95; 0.875 for conv_small)."""
import numpy as np
import tensorflow as tf

from preprocessing import preprocessing_factory

MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255
IMAGE = np.random.default_rng(1).integers(0, 256, (200, 300, 3), dtype=np.uint8)


def _expected(shorter_side, size):
    """timm's eval transform: Resize(floor(size / crop_pct)), bicubic, CenterCrop."""
    longer_side = int(shorter_side * 300 / 200)
    resized = tf.image.resize(tf.cast(IMAGE, tf.float32), [shorter_side, longer_side],
                              method='bicubic', antialias=True)
    top = round((shorter_side - size) / 2)
    left = round((longer_side - size) / 2)
    return (np.clip(resized.numpy(), 0, 255)[top:top + size, left:left + size] - MEAN) / STD


def test_mobilenet_v4_evaluates_at_crop_pct_095():
    # 256 / 0.95 = 269.5: the shorter side to 269 (timm floors), then the central 256.
    output = preprocessing_factory.get_preprocessing('mobilenet_v4')(tf.constant(IMAGE),
                                                                    256, 256)
    assert output.shape == (256, 256, 3) and output.dtype == tf.float32
    np.testing.assert_allclose(output, _expected(269, 256), rtol=1e-5, atol=1e-4)


def test_conv_small_evaluates_at_crop_pct_0875():
    output = preprocessing_factory.get_preprocessing('mobilenet_v4_conv_small')(
        tf.constant(IMAGE), 224, 224)
    np.testing.assert_allclose(output, _expected(256, 224), rtol=1e-5, atol=1e-4)


def test_an_imported_crop_fraction_wins():
    output = preprocessing_factory.get_preprocessing('mobilenet_v4')(
        tf.constant(IMAGE), 224, 224, crop_fraction=0.875)
    np.testing.assert_allclose(output, _expected(256, 224), rtol=1e-5, atol=1e-4)


def test_training_crops_resizes_and_flips_reproducibly():
    train = preprocessing_factory.get_preprocessing('mobilenet_v4', is_training=True)
    first = train(tf.constant(IMAGE), 64, 64, seed=tf.constant([3, 7])).numpy()
    assert first.shape == (64, 64, 3)
    np.testing.assert_array_equal(train(tf.constant(IMAGE), 64, 64,
                                        seed=tf.constant([3, 7])), first)
    assert not np.allclose(train(tf.constant(IMAGE), 64, 64, seed=tf.constant([4, 7])),
                           first)


def test_other_weights_mean_std_and_interpolation_are_keywords():
    # mobilenetv4_conv_small.e3600_r256_in1k: mean and std 0.5 (an import.json's).
    fn = preprocessing_factory.get_preprocessing('mobilenet_v4_conv_small')
    output = fn(tf.constant(IMAGE), 224, 224, mean=(0.5,) * 3, std=(0.5,) * 3).numpy()
    expected = _expected(256, 224) * STD + MEAN  # back to pixels
    np.testing.assert_allclose(output, expected / 127.5 - 1, rtol=1e-5, atol=1e-4)
    bilinear = fn(tf.constant(IMAGE), 224, 224, interpolation='bilinear').numpy()
    assert not np.allclose(bilinear, _expected(256, 224), atol=1e-2)
