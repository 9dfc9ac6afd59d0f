"""image_coding: formats recognised by their bytes, WebP re-encoded as PNG, and a JPEG's
EXIF orientation read and applied."""
import io

import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils

from datasets import image_coding


def _jpeg(image, quality=95):
    return tf.io.encode_jpeg(image, quality=quality).numpy()


@pytest.mark.parametrize("byte_order", [b"MM", b"II"])
@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_is_read_in_both_byte_orders(orientation, byte_order):
    jpeg = testing_utils.with_exif_orientation(_jpeg(testing_utils.gradient_image(8, 8)),
                                               orientation, byte_order)
    assert image_coding.exif_orientation(jpeg) == orientation


@pytest.mark.parametrize("data", [b"", b"\xff\xd8", b"\xff\xd8\xff\xe1\x00\x08Exif\0\0",
                                  b"\xff\xd8\xff\xe1\x00\x10Exif\0\0MM\x00\x2a\xff\xff\xff\xff"])
def test_missing_or_malformed_exif_means_upright(data):
    assert image_coding.exif_orientation(data) == 1
    assert image_coding.exif_orientation(
        _jpeg(testing_utils.gradient_image(8, 8))) == 1


@pytest.mark.parametrize("orientation", range(1, 9))
def test_orientation_is_applied_as_pillow_applies_it(orientation):
    image_module = pytest.importorskip("PIL.Image")
    image_ops = pytest.importorskip("PIL.ImageOps")
    data = testing_utils.with_exif_orientation(
        _jpeg(testing_utils.gradient_image(16, 24)), orientation)
    expected = np.asarray(image_ops.exif_transpose(image_module.open(io.BytesIO(data))))

    image = image_coding.check_image(data, apply_orientation=True)

    upright = tf.io.decode_jpeg(image.data).numpy()
    assert upright.shape == expected.shape == (image.height, image.width, 3)
    assert np.abs(upright.astype(int) - expected).max() <= 12
    assert image.oriented == (orientation != 1)
    if orientation == 1:
        assert image.data == data  # the bytes as they were
    else:
        assert image.format == "jpeg" and image_coding.exif_orientation(image.data) == 1


def test_orientation_is_left_alone_unless_asked():
    data = testing_utils.with_exif_orientation(
        _jpeg(testing_utils.gradient_image(16, 24)), 6)
    image = image_coding.check_image(data)
    assert image.data == data and (image.height, image.width) == (16, 24)
    assert not image.oriented


@pytest.mark.parametrize("mode", ["RGB", "RGBA"])
def test_webp_is_read_and_stored_as_png(mode):
    image_module = pytest.importorskip("PIL.Image")
    pixels = np.random.default_rng(0).integers(1, 256, (10, 14, len(mode)), dtype=np.uint8)
    # (Alpha from 1: lossless WebP may drop the colour of fully transparent pixels.)
    buffer = io.BytesIO()
    image_module.fromarray(pixels, mode).save(buffer, "WEBP", lossless=True)
    data = buffer.getvalue()
    assert image_coding.sniff_format(data) == "webp"

    image = image_coding.check_image(data)

    assert (image.format, image.height, image.width, image.reencoded) == ("png", 10, 14, True)
    np.testing.assert_array_equal(tf.io.decode_png(image.data).numpy(), pixels[..., :3])


def test_a_truncated_webp_is_unreadable():
    image_module = pytest.importorskip("PIL.Image")
    buffer = io.BytesIO()
    image_module.fromarray(testing_utils.gradient_image(32, 32)).save(buffer, "WEBP")
    with pytest.raises(image_coding.UnreadableImage):
        image_coding.check_image(buffer.getvalue()[:40])


def test_a_truncated_jpeg_is_named_so_and_trailing_bytes_are_fine():
    data = _jpeg(testing_utils.gradient_image(16, 16))
    for cut in (data[:len(data) // 2], data[:-2], data[:20]):
        with pytest.raises(image_coding.UnreadableImage, match="truncated JPEG"):
            image_coding.check_image(cut)
    assert image_coding.check_image(data + b"padding").height == 16
