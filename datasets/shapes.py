"""Shapes: a small, learnable dataset drawn on the fly, so a demo needs no network.

32x32 RGB images, each with one filled or outlined shape of one of ten classes at a
random position and size (10-24 px across), in a random bright colour on a random dark
background, plus Gaussian pixel noise. Generation is deterministic given the seed.
"""
import os

from absl import logging
import numpy as np

from datasets import dataset_utils

INFO = dataset_utils.DatasetInfo(
    name="shapes",
    splits_to_sizes={"train": 5000, "validation": 1000},
    num_classes=10,
    file_pattern="shapes_%s_*.tfrecord",
    image_shape=(32, 32, 3),
    class_names=("circle", "square", "triangle", "diamond", "plus", "x_cross", "ring",
                 "hollow_square", "horizontal_bar", "vertical_bar"),
    items_to_descriptions={
        "image": "A [32 x 32 x 3] color image of one shape.",
        "label": "A single integer between 0 and 9",
    },
)

DEFAULT_SEED = 0
NUM_SHARDS = 2
_SHARD_NAME = "shapes_%s_%05d-of-%05d.tfrecord"
# Each split draws from its own stream, so split sizes can change independently.
_SPLIT_STREAMS = {"train": 0, "validation": 1}

_SIZE = INFO.image_shape[0]
_MIN_RADIUS, _MAX_RADIUS = 5.0, 12.0
_DARK_MAX, _BRIGHT_MIN = 110.0, 145.0  # Background and shape channel ranges, 0-255.
_NOISE_STDDEV = 10.0


def _masks(label: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Boolean masks for one class; u, v are pixel offsets divided by the radius."""
    au, av = np.abs(u), np.abs(v)
    radius = np.sqrt(u * u + v * v)
    box = np.maximum(au, av)
    if label == 0:  # circle
        return radius <= 1.0
    if label == 1:  # square
        return box <= 0.85
    if label == 2:  # triangle, apex up (image y grows downwards)
        return (v >= -0.9) & (v <= 0.8) & (au <= (v + 0.9) / 1.7)
    if label == 3:  # diamond
        return au + av <= 1.0
    if label == 4:  # plus
        return (box <= 1.0) & (np.minimum(au, av) <= 0.25)
    if label == 5:  # x_cross: the plus turned by 45 degrees
        return (box <= 0.8) & (np.minimum(np.abs(u - v), np.abs(u + v)) <= 0.35)
    if label == 6:  # ring
        return (radius <= 1.0) & (radius >= 0.55)
    if label == 7:  # hollow_square
        return (box <= 0.85) & (box >= 0.45)
    if label == 8:  # horizontal_bar
        return (au <= 1.0) & (av <= 0.3)
    if label == 9:  # vertical_bar
        return (au <= 0.3) & (av <= 1.0)
    raise ValueError(f"Unknown shape class {label}")


def _colour_pairs(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Random (foreground, background) RGB colours, the shape always the brighter one.

    One polarity keeps classes easy to learn (with both, a small net must learn every
    shape twice and often stalls); the channel gap keeps every shape visible under noise.
    """
    foreground = rng.uniform(_BRIGHT_MIN, 255, (count, 3))
    background = rng.uniform(0, _DARK_MAX, (count, 3))
    return foreground, background


def generate(num_samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Draws num_samples images; returns uint8 [N, 32, 32, 3] images and int64 [N] labels.

    Classes are exactly balanced (up to num_samples % 10) and shuffled.
    """
    rng = np.random.default_rng(seed)
    num_classes = INFO.num_classes
    labels = rng.permutation(np.arange(num_samples) % num_classes).astype(np.int64)
    radii = rng.uniform(_MIN_RADIUS, _MAX_RADIUS, num_samples)
    # Centres keep the whole shape inside the image.
    centres = rng.uniform(radii[:, None], _SIZE - radii[:, None], (num_samples, 2))
    foreground, background = _colour_pairs(rng, num_samples)
    noise = rng.normal(0.0, _NOISE_STDDEV, (num_samples, _SIZE, _SIZE, 3))

    pixel_centres = np.arange(_SIZE) + 0.5
    u = (pixel_centres[None, None, :] - centres[:, 0, None, None]) / radii[:, None, None]
    v = (pixel_centres[None, :, None] - centres[:, 1, None, None]) / radii[:, None, None]
    mask = np.zeros((num_samples, _SIZE, _SIZE), dtype=bool)
    for label in range(num_classes):
        selected = labels == label
        mask[selected] = _masks(label, u[selected], v[selected])

    images = np.where(mask[..., None], foreground[:, None, None, :],
                      background[:, None, None, :]) + noise
    return np.clip(np.rint(images), 0, 255).astype(np.uint8), labels


def generate_split(split_name: str, seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """The images and labels of one split, as written by download_and_convert."""
    stream = _SPLIT_STREAMS[split_name]
    return generate(INFO.splits_to_sizes[split_name], seed=_split_seed(seed, stream))


def _split_seed(seed: int, stream: int) -> int:
    # SeedSequence mixes (seed, stream) so nearby seeds give unrelated streams.
    return int(np.random.SeedSequence([seed, stream]).generate_state(1)[0])


def output_paths(dataset_dir: str) -> list[str]:
    return [os.path.join(dataset_dir, _SHARD_NAME % (split, shard, NUM_SHARDS))
            for split in INFO.splits_to_sizes for shard in range(NUM_SHARDS)]


def download_and_convert(dataset_dir: str, keep_archives: bool = False,
                         seed: int = DEFAULT_SEED) -> None:
    """Generates every split as sharded TFRecords plus labels.txt in dataset_dir.

    Nothing is downloaded (keep_archives is accepted for a uniform interface and
    ignored). Skips everything if the outputs already exist.
    """
    del keep_archives  # No archives: the data is generated locally.
    if dataset_utils.is_converted(output_paths(dataset_dir), dataset_dir):
        logging.info("Shapes already generated in %s; skipping (delete the files to "
                     "regenerate)", dataset_dir)
        return
    os.makedirs(dataset_dir, exist_ok=True)
    for split in INFO.splits_to_sizes:
        images, labels = generate_split(split, seed)
        for shard, indices in enumerate(np.array_split(np.arange(len(labels)), NUM_SHARDS)):
            path = os.path.join(dataset_dir, _SHARD_NAME % (split, shard, NUM_SHARDS))
            dataset_utils.write_tfrecord(path, images[indices], labels[indices])
    dataset_utils.write_label_file(INFO.labels_to_names(), dataset_dir)
    logging.info("Finished generating shapes into %s", dataset_dir)
