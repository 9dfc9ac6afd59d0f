r"""Input pipeline throughput: the full training pipeline against raw read + decode.

  .venv/bin/python benchmarks/input_pipeline.py --make_flowers_like=600 \
      --dataset_dir=/tmp/flowers_like
  .venv/bin/python benchmarks/input_pipeline.py --dataset_name=flowers --dataset_dir=DIR
  .venv/bin/python benchmarks/input_pipeline.py --dataset_name=cifar10 \
      --dataset_dir=DIR --preprocessing_name=cifarnet --image_size=32

Both read the same split's shards with the same parallelism: "raw" parses each record
and decodes the whole image (tf.io.decode_image), nothing else; "train" is the input
function train_image_classifier.py builds (shuffle, robust decode, preprocessing for
training - for inception a crop decoded straight from the JPEG - and batching). They
alternate for --rounds rounds (the machine is shared and noisy); printed are the median
images per second and per CPU-second (all of this process's threads) of each, and the
per-round ratios, median [min, max]. Then --model_name trains for --train_steps on
the training pipeline, and the fraction of step time spent waiting for the next batch
is printed.

--make_flowers_like=N first writes N smooth 500x375 JPEGs (the size of the flowers
photos, not noise, which would decode slower than photos) as flowers-format shards.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cli import startup  # noqa: E402,F401  (first: configures TensorFlow before it loads)
from absl import app, flags  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from datasets import dataset_factory, dataset_utils, input_pipeline  # noqa: E402
from benchmarks import plain_step  # noqa: E402
from nets import nets_factory  # noqa: E402
from preprocessing import augment_policies, preprocessing_factory  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string('dataset_name', 'flowers', 'Dataset to read.')
flags.DEFINE_string('dataset_dir', None, 'Its converted TFRecords.')
flags.DEFINE_string('split', 'train', 'Split to read.')
flags.DEFINE_string('preprocessing_name', 'inception', 'Training preprocessing.')
flags.DEFINE_integer('image_size', 224, 'Output image size.')
flags.DEFINE_integer('batch_size', 32, 'Batch size.')
flags.DEFINE_integer('images_per_round', 1024, 'Images timed per round and side.')
flags.DEFINE_integer('rounds', 3, 'Alternating rounds.')
flags.DEFINE_integer('make_flowers_like', 0, 'First write this many flowers-like JPEGs.')
flags.DEFINE_string('model_name', 'mobilenet_v1', 'Model trained to measure input waits; '
                    'empty to skip.')
flags.DEFINE_integer('train_steps', 10, 'Timed training steps (after 2 untimed).')
flags.DEFINE_enum('augmentation', 'none', list(augment_policies.POLICY_NAMES),
                  'Augmentation policy of the training pipeline, as training\'s flag.')
flags.DEFINE_float('random_erase_prob', 0.0, 'Random erasing in the training pipeline, as '
                   'training\'s flag.')


def make_flowers_like(dataset_dir, count):
    os.makedirs(dataset_dir, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = dataset_utils.shard_paths(dataset_dir, 'flowers_train_%05d-of-%05d.tfrecord', 5)

    def to_example(index):
        small = rng.uniform(0, 255, (12, 16, 3)).astype(np.float32)
        image = tf.cast(tf.image.resize(small, (375, 500), 'bicubic'), tf.uint8)
        image = tf.clip_by_value(image + tf.cast(rng.integers(0, 8, (375, 500, 3)),
                                                 tf.uint8), 0, 255)
        data = tf.io.encode_jpeg(image, quality=90).numpy()
        return dataset_utils.image_to_tfexample(data, b'jpg', 375, 500, index % 5)

    dataset_utils.write_sharded_examples(paths, list(range(count)), to_example, 'flowers-like',
                                         num_workers=1)
    dataset_utils.write_label_file(dict(enumerate(
        ('daisy', 'dandelion', 'roses', 'sunflowers', 'tulips'))), dataset_dir)


def raw_dataset(spec):
    files = tf.data.Dataset.from_tensor_slices(spec.list_files()).repeat()
    records = files.interleave(tf.data.TFRecordDataset, cycle_length=tf.data.AUTOTUNE,
                               num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    # Shapes only are batched: the images differ in size, and the decode is what counts.
    shapes = records.map(lambda record: tf.shape(spec.decode(record)[0]),
                         num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    return shapes.batch(FLAGS.batch_size).prefetch(tf.data.AUTOTUNE)


def train_dataset(spec):
    augmentation = augment_policies.AugmentationConfig(
        augmentation=FLAGS.augmentation, random_erase_prob=FLAGS.random_erase_prob)
    preprocess = preprocessing_factory.get_preprocessing(FLAGS.preprocessing_name, True,
                                                         augmentation=augmentation)
    inception = FLAGS.preprocessing_name == 'inception'
    input_fn = input_pipeline.make_input_fn(spec, preprocess, input_pipeline.InputConfig(
        batch_size=FLAGS.batch_size, image_size=FLAGS.image_size, is_training=True,
        seed=0, report_skipped=True, decode_in_preprocessing=inception,
        use_bboxes=inception))
    return input_fn(None)


def images_per_sec(iterator, num_batches):
    """(images per second, images per CPU-second of this process, all its threads)."""
    next(iterator)  # the first batch includes start-up
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(num_batches):
        next(iterator)
    images = num_batches * FLAGS.batch_size
    return (images / (time.perf_counter() - started),
            images / (time.process_time() - cpu_started))


def _spread(values):
    return (f'{statistics.median(values):.2f} [{min(values):.2f}, {max(values):.2f}]')


def input_wait_fraction(spec):
    """Trains model_name on the training pipeline; the share of step time in next()."""
    num_classes = spec.num_classes
    network = nets_factory.get_network_fn(FLAGS.model_name, num_classes, is_training=True)
    network.build((FLAGS.image_size, FLAGS.image_size, 3))
    optimizer = tf.keras.optimizers.SGD(0.01)

    step = plain_step.make_train_step(network, optimizer)

    iterator = iter(train_dataset(spec))
    for _ in range(2):
        images, labels, _ = next(iterator)
        float(step(images, labels))
    waited = total = 0.0
    for _ in range(FLAGS.train_steps):
        started = time.perf_counter()
        images, labels, _ = next(iterator)
        got = time.perf_counter()
        float(step(images, labels))
        waited += got - started
        total += time.perf_counter() - started
    return waited / total, FLAGS.train_steps * FLAGS.batch_size / total


def main(argv):
    del argv
    if not FLAGS.dataset_dir:
        raise app.UsageError('Pass --dataset_dir.')
    if FLAGS.make_flowers_like:
        make_flowers_like(FLAGS.dataset_dir, FLAGS.make_flowers_like)
    spec = dataset_factory.get_dataset(FLAGS.dataset_name, FLAGS.split, FLAGS.dataset_dir)
    num_batches = max(1, FLAGS.images_per_round // FLAGS.batch_size)
    raw_iterator, train_iterator = iter(raw_dataset(spec)), iter(train_dataset(spec))
    raw, train = [], []
    for _ in range(FLAGS.rounds):
        raw.append(images_per_sec(raw_iterator, num_batches))
        train.append(images_per_sec(train_iterator, num_batches))
    print(f'cores: {os.cpu_count()}, dataset: {FLAGS.dataset_name}, preprocessing: '
          f'{FLAGS.preprocessing_name} at {FLAGS.image_size}, batch {FLAGS.batch_size}, '
          f'augmentation: {FLAGS.augmentation}, random erasing: {FLAGS.random_erase_prob:g}')
    for name, rounds in (('raw read+decode', raw), ('training pipeline', train)):
        print(f'{name}: {statistics.median(r[0] for r in rounds):.0f} img/s, '
              f'{statistics.median(r[1] for r in rounds):.0f} img/CPU-s  (rounds: '
              f'{", ".join(f"{r[0]:.0f}" for r in rounds)} img/s)')
    print('training / raw, per-round ratio, median [min, max]: '
          f'{_spread([t[0] / r[0] for t, r in zip(train, raw)])} by wall time, '
          f'{_spread([t[1] / r[1] for t, r in zip(train, raw)])} per CPU-second')
    if FLAGS.model_name:
        fraction, rate = input_wait_fraction(spec)
        print(f'{FLAGS.model_name} training: {rate:.1f} img/s, waiting for input '
              f'{100 * fraction:.1f}% of step time')


if __name__ == '__main__':
    app.run(main)
