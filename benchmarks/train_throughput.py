r"""Training throughput: our train step against Keras training the same architecture.

  .venv/bin/python benchmarks/train_throughput.py --models=resnet_v1_50,mobilenet_v1

For each model, our Trainer's compiled step (the one train_image_classifier.py runs:
forward, softmax cross-entropy, gradients, TF1 momentum kernels, batch-norm updates,
global step) and a Keras train step (`tf.keras.applications` model, GradientTape,
SGD with momentum) run on the same in-memory batch, same batch size, same optimizer
settings, no weight decay on either side. The two alternate round by round
(interleaved: these machines are shared and noisy); each round times
--steps_per_round steps after --warmup_steps untimed ones. Printed: the median img/s
of each and their ratio (ours / Keras, > 1 means ours is faster).
"""
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cli import startup  # noqa: E402,F401  (first: configures TensorFlow before it loads)
from absl import app, flags  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from deployment import model_deploy, runners  # noqa: E402
from nets import nets_factory  # noqa: E402
from training import optimizers, train_loop  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list('models', ['inception_v3', 'vgg_16', 'resnet_v1_50', 'mobilenet_v1'],
                  'Model names to measure (each needs a Keras counterpart below).')
flags.DEFINE_integer('rounds', 3, 'Interleaved rounds per model.')
flags.DEFINE_integer('steps_per_round', 3, 'Timed steps per round and side.')
flags.DEFINE_integer('warmup_steps', 2, 'Untimed steps per side before the rounds.')
flags.DEFINE_integer('batch_size', None, 'Override every model\'s batch size.')

# Our model -> (Keras application, batch size, classes): the issues' configurations.
KERAS_COUNTERPARTS = {
    'inception_v3': ('InceptionV3', 32, 1000),
    'vgg_16': ('VGG16', 32, 1000),
    'resnet_v1_50': ('ResNet50', 32, 1000),
    'mobilenet_v1': ('MobileNet', 64, 1000),
}
LEARNING_RATE, MOMENTUM = 0.01, 0.9


def _batch(batch_size, image_size, num_classes):
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (batch_size, image_size, image_size, 3)).astype(np.float32)
    labels = rng.integers(0, num_classes, batch_size).astype(np.int64)
    return tf.constant(images), tf.constant(labels)


def ours(model_name, images, labels, num_classes, train_dir):
    """A function running n steps of the toolkit's compiled train step."""
    strategy = model_deploy.create_strategy(model_deploy.DeploymentConfig())
    with strategy.scope():
        network = nets_factory.get_network_fn(model_name, num_classes, is_training=True)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig(
            optimizer='momentum', momentum=MOMENTUM))
    dataset = tf.data.Dataset.from_tensors((images, labels)).repeat()
    trainer = train_loop.Trainer(
        strategy=strategy, network=network, optimizer=optimizer,
        learning_rate_fn=lambda step: tf.constant(LEARNING_RATE),
        input_fn=lambda context: dataset, image_shape=images.shape[1:],
        config=train_loop.TrainConfig(train_dir=train_dir, batch_size=images.shape[0]))
    runner = trainer.runner = runners.create_runner(strategy, trainer.input_fn)

    def run(num_steps):
        return runner.fetch(runner.run(trainer._train_steps, num_steps))[0]['total_loss']

    return run


def keras(application, images, labels, num_classes):
    """A function running n steps of a Keras train step on the application model."""
    model = getattr(tf.keras.applications, application)(
        weights=None, input_shape=images.shape[1:], classes=num_classes)
    optimizer = tf.keras.optimizers.SGD(LEARNING_RATE, momentum=MOMENTUM)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()  # applications end in softmax

    @tf.function
    def steps(num_steps):
        loss = tf.constant(0.0)
        for _ in tf.range(num_steps):
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(images, training=True))
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    return lambda num_steps: float(steps(tf.constant(num_steps)))


def _images_per_second(run, num_steps, batch_size):
    started = time.perf_counter()
    run(num_steps)
    return num_steps * batch_size / (time.perf_counter() - started)


def main(argv):
    del argv
    print(f'TensorFlow {tf.__version__}, {os.cpu_count()} CPUs; rounds={FLAGS.rounds}, '
          f'steps_per_round={FLAGS.steps_per_round}, warmup={FLAGS.warmup_steps}')
    rows = []
    for model_name in FLAGS.models:
        application, batch_size, num_classes = KERAS_COUNTERPARTS[model_name]
        batch_size = FLAGS.batch_size or batch_size
        size = nets_factory.get_spec(model_name).default_image_size
        images, labels = _batch(batch_size, size, num_classes)
        with tempfile.TemporaryDirectory() as train_dir:
            sides = {'ours': ours(model_name, images, labels, num_classes, train_dir),
                     'keras': keras(application, images, labels, num_classes)}
            for run in sides.values():
                run(FLAGS.warmup_steps)
            rates = {name: [] for name in sides}
            for _ in range(FLAGS.rounds):
                for name, run in sides.items():
                    rates[name].append(_images_per_second(run, FLAGS.steps_per_round,
                                                          batch_size))
        ours_rate, keras_rate = (statistics.median(rates[n]) for n in ('ours', 'keras'))
        rows.append((model_name, application, batch_size, ours_rate, keras_rate))
        print(f'{model_name}: ours {[round(r, 1) for r in rates["ours"]]} img/s, '
              f'keras {application} {[round(r, 1) for r in rates["keras"]]} img/s',
              flush=True)
    print('\n| model | Keras counterpart | batch | ours img/s | Keras img/s | ours / Keras |')
    print('|---|---|---|---|---|---|')
    for model_name, application, batch_size, ours_rate, keras_rate in rows:
        print(f'| {model_name} | {application} | {batch_size} | {ours_rate:.1f} | '
              f'{keras_rate:.1f} | {ours_rate / keras_rate:.2f} |')


if __name__ == '__main__':
    app.run(main)
