"""Checks and re-encodes image files for the converters, with TensorFlow's codecs only.

A file is readable if TensorFlow decodes it whole: what the converters write, the
input pipeline can decode later.
"""
import dataclasses
import re

import tensorflow as tf

_SIGNATURES = ((b"\xff\xd8\xff", "jpeg"), (b"\x89PNG\r\n\x1a\n", "png"),
               (b"GIF87a", "gif"), (b"GIF89a", "gif"), (b"BM", "bmp"))
# JPEG start-of-frame markers (baseline, progressive, ...); DHT, JPG and DAC excluded.
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


class UnreadableImage(ValueError):
    """The bytes are not an image TensorFlow can decode."""


@dataclasses.dataclass(frozen=True)
class EncodedImage:
    data: bytes
    format: str  # 'jpeg' or 'png'
    height: int
    width: int
    reencoded: bool


def sniff_format(data: bytes) -> str | None:
    """'jpeg', 'png', 'gif' or 'bmp' from the leading bytes, whatever the file is named."""
    for signature, name in _SIGNATURES:
        if data.startswith(signature):
            return name
    return None


def jpeg_num_components(data: bytes) -> int | None:
    """Colour components in a JPEG's frame header (3 RGB/YCbCr, 4 CMYK, 1 grey)."""
    position = 2
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        length = int.from_bytes(data[position + 2:position + 4], "big")
        if marker in _SOF_MARKERS:
            return data[position + 9] if position + 9 < len(data) else None
        position += 2 + length
    return None


def _decode(data: bytes, channels: int) -> tf.Tensor:
    try:
        return tf.io.decode_image(data, channels=channels, expand_animations=False)
    except (tf.errors.InvalidArgumentError, tf.errors.UnknownError) as error:
        # Keep TensorFlow's reason, without its "{{function_node ...}}" and "[Op:...]".
        reason = re.sub(r"\{\{[^}]*\}\}|\[Op:\w+\]", "", error.message).strip()
        raise UnreadableImage(reason.splitlines()[0] if reason else "cannot decode") from None


def _encode_jpeg(image: tf.Tensor) -> bytes:
    # quality=100 as TF-Slim's ImageNet converter re-encoded.
    return tf.io.encode_jpeg(image, format="rgb", quality=100).numpy()


def check_image(data: bytes, keep_formats=("jpeg", "png")) -> EncodedImage:
    """The image as stored: JPEG and PNG bytes unchanged, anything else (GIF, BMP) as PNG.

    Raises UnreadableImage if the bytes are not an image or do not decode completely.
    """
    file_format = sniff_format(data)
    if file_format is None:
        raise UnreadableImage("not a JPEG, PNG, GIF or BMP file")
    image = _decode(data, channels=0)
    height, width = int(image.shape[0]), int(image.shape[1])
    if file_format in keep_formats:
        return EncodedImage(data, file_format, height, width, reencoded=False)
    channels = 3 if image.shape[-1] in (3, 4) else 1
    image = _decode(data, channels=channels)
    return EncodedImage(tf.io.encode_png(image).numpy(), "png", height, width,
                        reencoded=True)


def as_rgb_jpeg(data: bytes) -> EncodedImage:
    """A JPEG TensorFlow reads as RGB: colour and grey JPEGs unchanged; CMYK JPEGs and
    other formats (e.g. a PNG named .JPEG) re-encoded as RGB, as TF-Slim did for ImageNet.
    """
    file_format = sniff_format(data)
    if file_format is None:
        raise UnreadableImage("not a JPEG, PNG, GIF or BMP file")
    if file_format == "jpeg" and jpeg_num_components(data) in (1, 3):
        image = _decode(data, channels=0)
        return EncodedImage(data, "jpeg", int(image.shape[0]), int(image.shape[1]),
                            reencoded=False)
    image = _decode(data, channels=3)
    return EncodedImage(_encode_jpeg(image), "jpeg", int(image.shape[0]),
                        int(image.shape[1]), reencoded=True)
