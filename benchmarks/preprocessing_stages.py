r"""CPU time per image of each stage of inception's training preprocessing, one stage at
a time inside a tf.data map, against a raw decode of the whole image.

  .venv/bin/python benchmarks/preprocessing_stages.py --dataset_dir=/tmp/flowers_like

Reads the first --num_records JPEGs of the split's shards into memory (build a set with
benchmarks/input_pipeline.py --make_flowers_like=600), then for each stage maps
--images_per_round images through it (parallel map, reduced to one number per image, no
batching) and takes this process's CPU time. Stages alternate for --rounds rounds; printed
per stage is the median CPU microseconds per image [min, max], less the 'read' stage
(the map's own cost). The jitter stages work on a 224x224 float image.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cli import startup  # noqa: E402,F401  (first: configures TensorFlow before it loads)
from absl import app, flags  # noqa: E402
import tensorflow as tf  # noqa: E402

from datasets import dataset_factory  # noqa: E402
from preprocessing import inception_preprocessing as inception  # noqa: E402
from preprocessing import random_draws  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string('dataset_name', 'flowers', 'Dataset to read.')
flags.DEFINE_string('dataset_dir', None, 'Its converted TFRecords.', required=True)
flags.DEFINE_integer('num_records', 64, 'JPEGs held in memory and cycled.')
flags.DEFINE_integer('images_per_round', 1000, 'Images per stage and round.')
flags.DEFINE_integer('rounds', 5, 'Alternating rounds.')

SIZE = 224
WHOLE_BOX = tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4])


def _seeds(index):
    """The five seeds preprocess_for_train splits an example's seed into."""
    return random_draws.split(tf.stack([tf.cast(index, tf.int32), 7]), 5)


def _crop(index, encoded):
    return inception.decode_and_crop(encoded, WHOLE_BOX, _seeds(index)[0])


def _resized(index, encoded):
    image = tf.image.convert_image_dtype(_crop(index, encoded), tf.float32)
    return inception._RESIZE_METHODS[0](image, SIZE, SIZE)  # fast mode's: TF1 bilinear


def _stages():
    image = tf.random.stateless_uniform([SIZE, SIZE, 3], [1, 2])

    def draws(index, _):
        _, _, flip_seed, ordering_seed, color_seed = _seeds(index)
        return inception._fast_mode_draws(flip_seed, ordering_seed, color_seed)[1]

    def fused_jitter(index, _):
        _, _, flip_seed, ordering_seed, color_seed = _seeds(index)
        return inception._fast_mode_jitter(
            image, *inception._fast_mode_draws(flip_seed, ordering_seed, color_seed))

    def ops_jitter(index, _):
        _, _, flip_seed, ordering_seed, color_seed = _seeds(index)
        flipped = tf.image.stateless_random_flip_left_right(image, flip_seed)
        return random_draws.choice(ordering_seed, 2, lambda ordering: lambda: (
            inception.distort_color(flipped, ordering, True, color_seed) - 0.5) * 2.0)

    return {
        'read': lambda index, encoded: tf.strings.length(encoded),
        'raw decode (whole image)': lambda index, encoded: tf.io.decode_image(
            encoded, channels=3, expand_animations=False),
        'crop decode': _crop,
        'crop decode + resize to 224': _resized,
        'draws (flip, order, colour)': draws,
        'flip + colour jitter, fused (XLA)': fused_jitter,
        'flip + colour jitter, op by op': ops_jitter,
    }


def _cpu_microseconds(records, stage):
    dataset = (tf.data.Dataset.from_tensor_slices(records).repeat().enumerate()
               .map(lambda index, encoded: tf.reduce_sum(tf.cast(stage(index, encoded),
                                                                  tf.float32)),
                    num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
               .take(FLAGS.images_per_round))
    for _ in dataset.take(8):  # traced, threads started
        pass
    started = time.process_time()
    for _ in dataset:
        pass
    return (time.process_time() - started) / FLAGS.images_per_round * 1e6


def main(argv):
    del argv
    spec = dataset_factory.get_dataset(FLAGS.dataset_name, 'train', FLAGS.dataset_dir)
    records = tf.stack([spec.parse(record)['encoded'] for record in
                        tf.data.TFRecordDataset(spec.list_files()).take(FLAGS.num_records)])
    stages = _stages()
    spent = {name: [] for name in stages}
    for _ in range(FLAGS.rounds):
        for name, stage in stages.items():
            spent[name].append(_cpu_microseconds(records, stage))
    print(f'{FLAGS.images_per_round} images per stage and round, {FLAGS.rounds} rounds; '
          'CPU microseconds per image beyond the read stage, median [min, max]:')
    for name, values in spent.items():
        if name == 'read':
            continue
        net = [v - r for v, r in zip(values, spent['read'])]
        print(f'  {name:36s} {statistics.median(net):7.0f} [{min(net):.0f}, {max(net):.0f}]')


if __name__ == '__main__':
    app.run(main)
