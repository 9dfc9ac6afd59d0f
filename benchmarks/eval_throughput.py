r"""Evaluation throughput: our evaluator against Keras `model.evaluate`, same architecture.

  .venv/bin/python benchmarks/eval_throughput.py --models=cifarnet,lenet --rounds=5

Both sides make one exact pass over the same in-memory split (--num_examples synthetic
images, batches of --batch_size, the last one short) from the same tf.data pipeline:
  ours    training.eval_loop.Evaluator, what eval_image_classifier.py runs: forward in
          inference mode, confusion matrix and top-k hits over the padded, masked batch;
          its tf.function is traced once, on the untimed warm-up pass;
  keras   `model.evaluate` of the Keras twin (benchmarks/train_throughput.py), compiled
          with sparse categorical cross-entropy and accuracy, after a warm-up pass.
The sides alternate for --rounds rounds; printed are the median examples per second of
each and the median of the per-round ratios (ours / keras).
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

from benchmarks.train_throughput import KERAS_COUNTERPARTS  # noqa: E402
from nets import nets_factory  # noqa: E402
from training import eval_loop  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer('num_examples', 2000, 'Examples in the evaluated split.')
flags.DEFINE_integer('eval_batch_size', 100, 'Examples per batch.')


def _split(image_shape, num_classes):
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (FLAGS.num_examples, *image_shape)).astype(np.float32)
    labels = rng.integers(0, num_classes, FLAGS.num_examples).astype(np.int64)
    return tf.data.Dataset.from_tensor_slices((images, labels)).batch(
        FLAGS.eval_batch_size).cache()


def _timed(run):
    started = time.perf_counter()
    run()
    return FLAGS.num_examples / (time.perf_counter() - started)


def main(argv):
    del argv
    rows = []
    for model_name in FLAGS.models:
        builder, _, num_classes = KERAS_COUNTERPARTS[model_name]
        size = nets_factory.get_spec(model_name).default_image_size
        channels = 1 if model_name == 'lenet' else 3
        image_shape = (size, size, channels)
        split = _split(image_shape, num_classes)
        network = nets_factory.get_network_fn(model_name, num_classes)
        network.build(image_shape)
        evaluator = eval_loop.Evaluator(network, num_classes=num_classes)
        model = builder(num_classes, image_shape)
        model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=['accuracy'])
        sides = {
            'ours': lambda: evaluator.evaluate(split, batch_size=FLAGS.eval_batch_size),
            'keras': lambda: model.evaluate(split, verbose=0)}
        for run in sides.values():  # tracing and the cache fill, untimed
            run()
        rates = {name: [] for name in sides}
        for _ in range(FLAGS.rounds):
            for name, run in sides.items():
                rates[name].append(_timed(run))
        ratio = statistics.median(a / b for a, b in zip(rates['ours'], rates['keras']))
        rows.append((model_name, rates, ratio))
        print(f'{model_name}: ' + '; '.join(f'{n} {[round(r) for r in v]}'
                                            for n, v in rates.items()) + ' examples/s',
              flush=True)
    print(f'\n{FLAGS.num_examples} examples, batch {FLAGS.eval_batch_size}, '
          f'{FLAGS.rounds} interleaved rounds; median examples/s and median per-round '
          'ratio.\n\n| model | ours ex/s | Keras evaluate ex/s | ours / Keras |\n'
          '|---|---|---|---|')
    for model_name, rates, ratio in rows:
        print(f'| {model_name} | {statistics.median(rates["ours"]):.0f} | '
              f'{statistics.median(rates["keras"]):.0f} | {ratio:.2f} |')


if __name__ == '__main__':
    app.run(main)
