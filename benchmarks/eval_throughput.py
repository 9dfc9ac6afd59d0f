r"""Evaluation throughput: our evaluator against Keras `model.evaluate`, same architecture.

  .venv/bin/python benchmarks/eval_throughput.py --models=cifarnet,lenet --rounds=5

Both sides make one exact pass over the same in-memory split (--num_examples synthetic
images, batches of --batch_size, the last one short) from the same tf.data pipeline:
  ours    training.evaluation.evaluator.Evaluator, what eval_image_classifier.py runs: forward in
          inference mode, confusion matrix and top-k hits over the padded, masked batch;
          its tf.function is traced once, on the untimed warm-up pass;
  keras   `model.evaluate` of the Keras twin (benchmarks/train_throughput.py), compiled
          with sparse categorical cross-entropy and accuracy, after a warm-up pass.
The sides alternate for --rounds rounds, round i starting with side i mod 2
(training.benchmark.rounds.rotated: neither always runs first); printed are the median examples per second and
per CPU-second (all the process's threads) of each, and the per-round ratios (ours /
keras), median [min, max], and each side's forward GFLOP per image (nets.flops:
convolutions and matrix products, counted from the traced graph).
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
from nets import flops, nets_factory  # noqa: E402
from training.benchmark import rounds as rounds_lib  # noqa: E402
from training.evaluation import evaluator as evaluator_lib  # noqa: E402

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
    """(examples per second, examples per CPU-second of the process, all threads)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    run()
    return (FLAGS.num_examples / (time.perf_counter() - started),
            FLAGS.num_examples / (time.process_time() - cpu_started))


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
        evaluator = evaluator_lib.Evaluator(network, num_classes=num_classes)
        model = builder(num_classes, image_shape)
        model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=['accuracy'])
        gflops = (flops.network_forward_flops(network, image_shape) / 1e9,
                  flops.forward_flops(lambda x: model(x, training=False), image_shape) / 1e9)
        sides = {
            'ours': lambda: evaluator.evaluate(split, batch_size=FLAGS.eval_batch_size),
            'keras': lambda: model.evaluate(split, verbose=0)}
        for run in sides.values():  # tracing and the cache fill, untimed
            run()
        rates = {name: [] for name in sides}
        for round_index in range(FLAGS.rounds):
            for name in rounds_lib.rotated(list(sides), round_index):
                rates[name].append(_timed(sides[name]))
        ratios = [[a[i] / b[i] for a, b in zip(rates['ours'], rates['keras'])]
                  for i in (0, 1)]
        rows.append((model_name, rates, ratios, gflops))
        print(f'{model_name}: ' + '; '.join(f'{n} {[round(r[0]) for r in v]}'
                                            for n, v in rates.items()) + ' examples/s',
              flush=True)
    print(f'\n{FLAGS.num_examples} examples, batch {FLAGS.eval_batch_size}, '
          f'{FLAGS.rounds} interleaved rounds (round i starts with side i mod 2); median examples/s (and per CPU-second), '
          'per-round ratios median [min, max].\n\n'
          '| model | ours ex/s | Keras evaluate ex/s | ours / Keras | ours ex/CPU-s | '
          'Keras ex/CPU-s | ours / Keras per CPU-s | forward GFLOP/img ours, Keras |\n'
          '|---|---|---|---|---|---|---|---|')

    def spread(values):
        return f'{statistics.median(values):.2f} [{min(values):.2f}, {max(values):.2f}]'

    for model_name, rates, ratios, gflops in rows:
        ours, keras = ([statistics.median(r[i] for r in rates[side]) for i in (0, 1)]
                       for side in ('ours', 'keras'))
        print(f'| {model_name} | {ours[0]:.0f} | {keras[0]:.0f} | {spread(ratios[0])} | '
              f'{ours[1]:.0f} | {keras[1]:.0f} | {spread(ratios[1])} | '
              f'{gflops[0]:.4g}, {gflops[1]:.4g} |')


if __name__ == '__main__':
    app.run(main)
