"""Helpers shared by tests (importable: tests/ is on pytest's pythonpath)."""
import pathlib

TEST_DATA = pathlib.Path(__file__).resolve().parent.parent / "data"


def golden_weight_value(name, shape):
    """The value slim_reference's golden runs gave variable `name` (see its README)."""
    import zlib
    import numpy as np
    rng = np.random.default_rng(zlib.crc32(name.encode('utf-8')))
    shape = tuple(shape)
    if name.endswith('moving_variance'):
        value = rng.uniform(0.5, 1.5, shape)
    elif name.endswith('gamma'):
        value = 1.0 + 0.1 * rng.standard_normal(shape)
    elif name.endswith(('beta', 'moving_mean', 'biases', 'bias')):
        value = 0.1 * rng.standard_normal(shape)
    elif name.endswith('depthwise_weights'):
        value = rng.standard_normal(shape) * np.sqrt(2 / (shape[0] * shape[1]))
    elif len(shape) >= 2:
        value = rng.standard_normal(shape) * np.sqrt(2 / np.prod(shape[:-1]))
    else:
        value = 0.1 * rng.standard_normal(shape)
    return value.astype(np.float32)


def write_tf1_checkpoint(prefix, tensors):
    """A name-based checkpoint {name: array}, the format tf.compat.v1.train.Saver writes
    (TF-Slim's model zoo); returns the prefix."""
    import tensorflow as tf
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=names,
                      shape_and_slices=[''] * len(names),
                      tensors=[tf.constant(tensors[n]) for n in names])
    return str(prefix)


def golden_input(image_size):
    import numpy as np
    return np.random.default_rng(0).uniform(
        -1, 1, (2, image_size, image_size, 3)).astype(np.float32)


def built_cifarnet(num_classes=10):
    """cifarnet for inference, its variables created (fresh initial values)."""
    from nets import nets_factory
    net = nets_factory.get_network_fn('cifarnet', num_classes)
    net.build((32, 32, 3))
    return net


def cifar_sized_examples(count=23, seed=0):
    """(float32 [count, 32, 32, 3] images, int64 [count] labels in 0..9), from a seed."""
    import numpy as np
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(count, 32, 32, 3)).astype(np.float32),
            rng.integers(0, 10, count).astype(np.int64))


def write_small_shapes(dataset_dir, num_train=64, num_validation=37, seed=0):
    """A few `shapes` examples in the real file layout, small enough for fast tests.

    Returns {split: (images, labels)} as written.
    """
    import os
    from datasets import dataset_utils, shapes
    os.makedirs(dataset_dir, exist_ok=True)
    written = {}
    for offset, (split, count) in enumerate([('train', num_train),
                                            ('validation', num_validation)]):
        images, labels = shapes.generate(count, seed=seed + offset)
        half = count // 2
        for shard, part in enumerate([slice(0, half), slice(half, count)]):
            path = os.path.join(dataset_dir, f'shapes_{split}_{shard:05d}-of-00002.tfrecord')
            dataset_utils.write_tfrecord(path, images[part], labels[part])
        written[split] = (images, labels)
    dataset_utils.write_label_file(shapes.INFO.labels_to_names(), dataset_dir)
    return written


def encoded_image(height, width, seed, image_format="jpeg", channels=3) -> bytes:
    """A small random image, JPEG or PNG encoded by TensorFlow."""
    import numpy as np
    import tensorflow as tf
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, channels),
                                                  dtype=np.uint8)
    if image_format == "png":
        return tf.io.encode_png(pixels).numpy()
    return tf.io.encode_jpeg(pixels, quality=90).numpy()


def with_exif_orientation(jpeg: bytes, orientation: int, byte_order: bytes = b"MM") -> bytes:
    """The JPEG with an EXIF APP1 segment holding only the orientation tag (1-8), as a
    camera held sideways writes it."""
    order = "big" if byte_order == b"MM" else "little"

    def number(value, size):
        return value.to_bytes(size, order)

    # TIFF header, then IFD0 with one entry: tag 0x0112, type SHORT, count 1, value.
    tiff = (byte_order + number(42, 2) + number(8, 4) + number(1, 2)
            + number(0x0112, 2) + number(3, 2) + number(1, 4) + number(orientation, 2)
            + b"\0\0" + number(0, 4))
    payload = b"Exif\0\0" + tiff
    segment = b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload
    return jpeg[:2] + segment + jpeg[2:]


def gradient_image(height, width):
    """uint8 [H, W, 3]: red grows down the rows, green along the columns, so any flip or
    turn of it shows (and JPEG keeps it nearly exact)."""
    import numpy as np
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    return np.stack([rows * 200 // max(height - 1, 1), cols * 200 // max(width - 1, 1),
                     np.full_like(rows, 60)], axis=-1).astype(np.uint8)


def trained_state(train_dir, at_step):
    """Every model, optimizer and random-generator value of train_dir's latest
    checkpoint, which must be of step at_step: what an exact resume must reproduce."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    reader = tf.train.load_checkpoint(str(train_dir))
    assert reader.get_tensor('global_step/.ATTRIBUTES/VARIABLE_VALUE') == at_step
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith(('model/', 'optimizer/', 'random_generator/'))}


def assert_bit_identical(expected, actual):
    """Two trained_state()s hold the same values to the bit (and enough of them)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    assert expected.keys() == actual.keys() and len(expected) >= 8
    for name, value in expected.items():
        np.testing.assert_array_equal(actual[name], value, err_msg=name)
