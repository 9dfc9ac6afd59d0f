"""Checks and re-encodes image files for the converters, with TensorFlow's codecs only.

A file is readable if TensorFlow decodes it whole: what the converters write, the
input pipeline can decode later. TensorFlow ignores a JPEG's EXIF orientation (how a
camera held sideways says to turn the picture); check_image can apply it.
"""
import dataclasses
import re

import tensorflow as tf

_SIGNATURES = ((b"\xff\xd8\xff", "jpeg"), (b"\x89PNG\r\n\x1a\n", "png"),
               (b"GIF87a", "gif"), (b"GIF89a", "gif"), (b"BM", "bmp"))
# JPEG start-of-frame markers (baseline, progressive, ...); DHT, JPG and DAC excluded.
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


_FORMATS = "a JPEG, PNG, GIF, BMP or WebP file"
# EXIF orientation -> what turns the stored pixels upright (tf.image.rot90 turns
# counter-clockwise); 1 is upright already.
_ORIENTATIONS = {
    2: tf.image.flip_left_right,
    3: lambda image: tf.image.rot90(image, k=2),
    4: tf.image.flip_up_down,
    5: tf.image.transpose,
    6: lambda image: tf.image.rot90(image, k=3),
    7: lambda image: tf.image.rot90(tf.image.transpose(image), k=2),
    8: lambda image: tf.image.rot90(image, k=1),
}
_EXIF_ORIENTATION_TAG = 0x0112


class UnreadableImage(ValueError):
    """The bytes are not an image TensorFlow can decode."""


@dataclasses.dataclass(frozen=True)
class EncodedImage:
    data: bytes
    format: str  # 'jpeg' or 'png'
    height: int
    width: int
    reencoded: bool
    oriented: bool = False  # turned upright by its EXIF orientation (then re-encoded)


def sniff_format(data: bytes) -> str | None:
    """'jpeg', 'png', 'gif', 'bmp' or 'webp' from the leading bytes, whatever the file
    is named."""
    for signature, name in _SIGNATURES:
        if data.startswith(signature):
            return name
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
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


def _jpeg_segments(data: bytes):
    """(marker, payload start, payload end) of a JPEG's segments, up to and including
    its first start of scan (SOS), after which the image data follows."""
    position = 2
    while position + 4 <= len(data) and data[position] == 0xFF:
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        length = int.from_bytes(data[position + 2:position + 4], "big")
        yield marker, position + 4, position + 2 + length
        if marker == 0xDA:
            return
        position += 2 + length


def _jpeg_is_truncated(data: bytes) -> bool:
    """Whether the JPEG ends before its end-of-image marker (after its first scan, when
    its headers can be walked). TensorFlow refuses those too, but only after printing
    libjpeg's complaint: checked here first."""
    scan = next((end for marker, _, end in _jpeg_segments(data) if marker == 0xDA), 2)
    return data.find(b"\xff\xd9", scan) < 0


def exif_orientation(data: bytes) -> int:
    """A JPEG's EXIF orientation (1-8, read from its APP1 segment); 1 when it has none."""
    for marker, start, end in _jpeg_segments(data):
        payload = data[start:end]
        if marker != 0xE1 or not payload.startswith(b"Exif\0\0"):
            continue
        tiff = payload[6:]
        order = {b"II": "little", b"MM": "big"}.get(tiff[:2])
        if order is None or len(tiff) < 8:
            return 1

        def number(offset, size):
            return int.from_bytes(tiff[offset:offset + size], order)

        first_directory = number(4, 4)
        for index in range(number(first_directory, 2)):
            entry = first_directory + 2 + 12 * index
            if entry + 12 > len(tiff):
                break
            if number(entry, 2) == _EXIF_ORIENTATION_TAG:
                value = number(entry + 8, 2)  # a SHORT, left-aligned in the value field
                return value if value in _ORIENTATIONS else 1
        return 1
    return 1


def _known_format(data: bytes) -> str:
    """sniff_format's answer; UnreadableImage saying why when there is none."""
    if not data:
        raise UnreadableImage("the file is empty")
    file_format = sniff_format(data)
    if file_format is None:
        raise UnreadableImage(f"not {_FORMATS}")
    return file_format


def _decode(data: bytes, channels: int) -> tf.Tensor:
    if sniff_format(data) == "jpeg" and _jpeg_is_truncated(data):
        raise UnreadableImage("truncated JPEG: it ends before its end-of-image marker")
    try:
        return tf.io.decode_image(data, channels=channels, expand_animations=False)
    except (tf.errors.InvalidArgumentError, tf.errors.UnknownError) as error:
        # Keep TensorFlow's reason, without its "{{function_node ...}}" and "[Op:...]".
        reason = re.sub(r"\{\{[^}]*\}\}|\[Op:\w+\]", "", error.message).strip()
        raise UnreadableImage(reason.splitlines()[0] if reason else "cannot decode") from None


def _encode_jpeg(image: tf.Tensor) -> bytes:
    # quality=100 as TF-Slim's ImageNet converter re-encoded.
    return tf.io.encode_jpeg(image, format="rgb", quality=100).numpy()


def check_image(data: bytes, keep_formats=("jpeg", "png"),
                apply_orientation: bool = False) -> EncodedImage:
    """The image as stored: JPEG and PNG bytes unchanged, anything else (GIF, BMP, WebP)
    as PNG. With apply_orientation, a JPEG whose EXIF orientation is not upright is
    turned upright and re-encoded (JPEG, quality 100).

    Raises UnreadableImage if the bytes are not an image or do not decode completely.
    """
    file_format = _known_format(data)
    image = _decode(data, channels=0)
    orientation = exif_orientation(data) if file_format == "jpeg" else 1
    if apply_orientation and orientation != 1:
        upright = _ORIENTATIONS[orientation](
            image if image.shape[-1] in (1, 3) else _decode(data, channels=3))
        return EncodedImage(tf.io.encode_jpeg(upright, quality=100).numpy(), "jpeg",
                            int(upright.shape[0]), int(upright.shape[1]), reencoded=True,
                            oriented=True)
    height, width = int(image.shape[0]), int(image.shape[1])
    if file_format in keep_formats:
        return EncodedImage(data, file_format, height, width, reencoded=False)
    # RGBA WebP does not decode as 3 channels: drop the alpha channel here instead.
    image = image[..., :3] if image.shape[-1] == 4 else image
    return EncodedImage(tf.io.encode_png(image).numpy(), "png", height, width,
                        reencoded=True)


def as_rgb_jpeg(data: bytes) -> EncodedImage:
    """A JPEG TensorFlow reads as RGB: colour and grey JPEGs unchanged; CMYK JPEGs and
    other formats (e.g. a PNG named .JPEG) re-encoded as RGB, as TF-Slim did for ImageNet.
    """
    file_format = _known_format(data)
    if file_format == "jpeg" and jpeg_num_components(data) in (1, 3):
        image = _decode(data, channels=0)
        return EncodedImage(data, "jpeg", int(image.shape[0]), int(image.shape[1]),
                            reencoded=False)
    image = _decode(data, channels=3)
    return EncodedImage(_encode_jpeg(image), "jpeg", int(image.shape[0]),
                        int(image.shape[1]), reencoded=True)
