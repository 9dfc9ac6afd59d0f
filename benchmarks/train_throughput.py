r"""Training throughput: our train step against Keras training the same architecture.

  .venv/bin/python benchmarks/train_throughput.py --models=cifarnet,lenet --batch_size=128
  .venv/bin/python benchmarks/train_throughput.py --models=cifarnet --batch_size=128 \
      --dataset_name=shapes --dataset_dir=/tmp/shapes      # real data: input waits too
  .venv/bin/python benchmarks/train_throughput.py --models=resnet_v1_50,mobilenet_v1
  .venv/bin/python benchmarks/train_throughput.py --models=efficientnet_b0,convnext_tiny \
      --batch_size=32 --sides=ours,keras --steps_per_round=3 --warmup_steps=2

For each model, three sides train the same architecture on the same batches with the
same batch size and optimizer (momentum 0.9, lr 0.01, no weight decay on any side):
  ours        the toolkit's compiled loop (Trainer._train_steps, what
              train_image_classifier.py runs: forward, softmax cross-entropy, gradients,
              TF1 momentum kernels, batch-norm updates, global step), --steps_per_loop
              steps per call;
  keras       a custom Keras train step (a tf.function looping GradientTape + SGD);
  keras_fit   Keras `model.fit` on the same tf.data input.
cifarnet and lenet are rebuilt layer for layer in Keras, initialised as slim does (the
step's speed depends on the weights' values: a Keras cifarnet initialised with
`TruncatedNormal(0.05)`, i.e. mean 0.05, ran 20 % faster, measured); the others use
`tf.keras.applications` without weights, giving logits (classifier_activation=None):
inception_v3, vgg_16, resnet_v1_50 and mobilenet_v1 as their applications are, and
efficientnet_b0, efficientnet_v2_s and convnext_tiny (EfficientNetB0, EfficientNetV2S,
ConvNeXtTiny) as import_keras_weights.py builds them (nets/keras_import), i.e. without
the application's own preprocessing: include_preprocessing=False for V2 and ConvNeXt,
and EfficientNetB0's Rescaling and Normalization layers, which that constructor cannot
leave out, cut off (the model starts at 'stem_conv_pad'), as our nets take an already
normalised image. Dropout and drop-connect are each side's default (EfficientNet 0.2
and 0.2 on both; ConvNeXt none). --image_size sets the size of both sides (default:
our net's). Inputs: a synthetic batch repeated (tf.data, both sides), or
with --dataset_dir the training input pipeline of train_image_classifier.py (every side
reads its own copy of it). The sides alternate for --rounds rounds (the machine is
shared and noisy), round i starting with side i mod n (training.benchmark.rounds.rotated:
no side always runs first, just after the warm-up or the matmuls); printed are the median img/s of each, the ratios to ours, and with
real data the fraction of our step time spent waiting for input (1 - real / synthetic
speed), each side's forward GFLOP per image and trainable parameters, and each side's
fraction of the matmul peak (3 x forward FLOPs x img/s against 4096x4096 matmuls in the
compute dtype sampled in this process for 2 s before and after each round, a round's
peak the fastest of them, as --benchmark's). The glibc
allocator tuning of cli.startup applies to every side (printed);
SLIM_MALLOC_TUNING=default turns it off for all of them.
"""
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cli import startup  # noqa: E402  (first: configures TensorFlow before it loads)
from absl import app, flags  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from cli import assembly  # noqa: E402
from deployment import model_deploy  # noqa: E402
from nets import flops, nets_factory, precision  # noqa: E402
from nets.keras_import import catalog, transfer  # noqa: E402
from training.benchmark import rounds as rounds_lib  # noqa: E402
from training.benchmark import throughput as throughput_lib
from training.recipes import optimizers
from training.loop import trainer as trainer_lib

FLAGS = flags.FLAGS
flags.DEFINE_list('models', ['cifarnet', 'lenet'],
                  'Model names to measure (each needs a Keras counterpart below).')
flags.DEFINE_list('sides', ['ours', 'keras', 'keras_fit'], 'What to measure: ours, '
                  'keras, keras_fit, ours_float32 (ours in float32 beside --precision).')
flags.DEFINE_integer('rounds', 5, 'Interleaved rounds per model.')
flags.DEFINE_integer('steps_per_round', 30, 'Timed steps per round and side.')
flags.DEFINE_integer('warmup_steps', 5, 'Untimed steps per side before the rounds.')
flags.DEFINE_integer('batch_size', None, 'Override every model\'s batch size.')
flags.DEFINE_integer('image_size', None, 'Synthetic images of this size on every side; '
                     'default: our net\'s default size.')
flags.DEFINE_integer('steps_per_loop', None, 'Our steps per tf.function call; default: '
                     'as train_image_classifier.py.')
flags.DEFINE_enum('precision', 'float32', list(precision.PRECISIONS),
                  'Compute precision of every side.')
flags.DEFINE_string('dataset_name', 'shapes', 'With --dataset_dir: the dataset to read.')
flags.DEFINE_string('dataset_dir', None, 'Read real data (the training pipeline) instead '
                    'of a synthetic batch.')


def _keras_cifarnet(num_classes, input_shape):
    layers = tf.keras.layers
    init = lambda stddev: tf.keras.initializers.TruncatedNormal(stddev=stddev)  # noqa: E731

    def lrn(x):  # the CPU kernel is float32 only, as in our layer kit
        return tf.cast(tf.nn.local_response_normalization(
            tf.cast(x, tf.float32), depth_radius=4, bias=1.0, alpha=0.001 / 9.0,
            beta=0.75), x.dtype)

    return tf.keras.Sequential([
        tf.keras.Input(input_shape),
        layers.Conv2D(64, 5, padding='same', activation='relu', kernel_initializer=init(5e-2)),
        layers.MaxPool2D(2, 2), layers.Lambda(lrn),
        layers.Conv2D(64, 5, padding='same', activation='relu', kernel_initializer=init(5e-2)),
        layers.Lambda(lrn), layers.MaxPool2D(2, 2), layers.Flatten(),
        layers.Dense(384, activation='relu', kernel_initializer=init(0.04),
                     bias_initializer=tf.keras.initializers.Constant(0.1)),
        layers.Dropout(0.5),
        layers.Dense(192, activation='relu', kernel_initializer=init(0.04),
                     bias_initializer=tf.keras.initializers.Constant(0.1)),
        layers.Dense(num_classes, kernel_initializer=init(1 / 192.0)),
        layers.Activation('linear', dtype='float32')])


def _keras_lenet(num_classes, input_shape):
    layers, init = tf.keras.layers, tf.keras.initializers.TruncatedNormal(stddev=0.1)
    return tf.keras.Sequential([
        tf.keras.Input(input_shape),
        layers.Conv2D(32, 5, padding='same', activation='relu', kernel_initializer=init),
        layers.MaxPool2D(2, 2),
        layers.Conv2D(64, 5, padding='same', activation='relu', kernel_initializer=init),
        layers.MaxPool2D(2, 2), layers.Flatten(),
        layers.Dense(1024, activation='relu', kernel_initializer=init), layers.Dropout(0.5),
        layers.Dense(num_classes, kernel_initializer=init),
        layers.Activation('linear', dtype='float32')])


def _application(name):
    def build(num_classes, input_shape):
        return getattr(tf.keras.applications, name)(
            weights=None, input_shape=input_shape, classes=num_classes,
            classifier_activation=None)
    return build


def _imported(model_name):
    """The Keras application import_keras_weights.py pairs with `model_name`, without its
    own preprocessing layers, as the import's logits check runs it."""
    def build(num_classes, input_shape):
        counterpart = catalog.get(model_name)
        keras_model = counterpart.application(
            weights=None, include_top=True, classes=num_classes,
            classifier_activation=None, input_shape=input_shape,
            **counterpart.application_options)
        return transfer.keras_logits_model(counterpart, keras_model)
    return build


# Our model -> (Keras builder, default batch size, classes).
KERAS_COUNTERPARTS = {
    'cifarnet': (_keras_cifarnet, 128, 10),
    'lenet': (_keras_lenet, 128, 10),
    'inception_v3': (_application('InceptionV3'), 32, 1000),
    'vgg_16': (_application('VGG16'), 32, 1000),
    'resnet_v1_50': (_application('ResNet50'), 32, 1000),
    'mobilenet_v1': (_application('MobileNet'), 64, 1000),
    'efficientnet_b0': (_imported('efficientnet_b0'), 32, 1000),
    'efficientnet_v2_s': (_imported('efficientnet_v2_s'), 16, 1000),
    'convnext_tiny': (_imported('convnext_tiny'), 32, 1000),
}
LEARNING_RATE, MOMENTUM = 0.01, 0.9


def _synthetic_input_fn(batch_size, image_shape, num_classes):
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (batch_size, *image_shape)).astype(np.float32)
    labels = rng.integers(0, num_classes, batch_size).astype(np.int64)
    return lambda context=None: tf.data.Dataset.from_tensors((images, labels)).repeat()


def _real_input_fn(model_name, batch_size):
    data = assembly.DataConfig(dataset_name=FLAGS.dataset_name, dataset_split_name='train',
                               dataset_dir=FLAGS.dataset_dir, model_name=model_name,
                               batch_size=batch_size, seed=0)
    assembled = assembly.assemble_data(data, is_training=True)
    # The training pipeline, without its unreadable-example counter.
    return (lambda context=None: assembled.input_fn(context).map(lambda i, l, _: (i, l)),
            assembled.image_shape, assembled.num_classes)


def ours(model_name, input_fn, image_shape, num_classes, batch_size, train_dir,
         precision='float32'):
    """A function running n steps of the toolkit's compiled train loop."""
    strategy = model_deploy.create_strategy(model_deploy.DeploymentConfig())
    with strategy.scope():
        network = nets_factory.get_network_fn(model_name, num_classes, weight_decay=0.0,
                                              is_training=True)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig(
            optimizer='momentum', momentum=MOMENTUM))
    config = trainer_lib.TrainConfig(
        train_dir=train_dir, batch_size=batch_size, precision=precision,
        **({'steps_per_loop': FLAGS.steps_per_loop} if FLAGS.steps_per_loop else {}))
    trainer = trainer_lib.Trainer(
        strategy=strategy, network=network, optimizer=optimizer,
        learning_rate_fn=lambda step: tf.constant(LEARNING_RATE), input_fn=input_fn,
        image_shape=image_shape, config=config)
    return trainer.run_steps


def keras_step(builder, input_fn, image_shape, num_classes):
    """A function running n steps of a custom Keras train step."""
    model = builder(num_classes, image_shape)
    optimizer = tf.keras.optimizers.SGD(LEARNING_RATE, momentum=MOMENTUM)
    if FLAGS.precision == 'mixed_float16':
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    iterator = iter(input_fn())

    @tf.function
    def steps(num_steps):
        loss = tf.constant(0.0)
        for _ in tf.range(num_steps):
            images, labels = next(iterator)
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(images, training=True))
                scaled = (optimizer.scale_loss(loss)
                          if FLAGS.precision == 'mixed_float16' else loss)
            gradients = tape.gradient(scaled, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    return lambda num_steps: float(steps(tf.constant(num_steps)))


def keras_fit(builder, input_fn, image_shape, num_classes):
    """A function running n steps of Keras model.fit."""
    model = builder(num_classes, image_shape)
    model.compile(optimizer=tf.keras.optimizers.SGD(LEARNING_RATE, momentum=MOMENTUM),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    dataset = input_fn()
    return lambda num_steps: model.fit(dataset, steps_per_epoch=num_steps, epochs=1,
                                       verbose=0)


def _images_per_second(run, num_steps, batch_size):
    """(images per wall-clock second, images per CPU second of this process)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    run(num_steps)
    images = num_steps * batch_size
    return (images / (time.perf_counter() - started),
            images / (time.process_time() - cpu_started))


def _measure(sides, batch_size, with_peak=True):
    """{side: [img/s per round]}, {side: [img per CPU-second per round]}, [each round's
    matmul peak in GFLOP/s] (empty without with_peak)."""
    for run in sides.values():
        run(FLAGS.warmup_steps)
    peak = throughput_lib.MatmulPeak(precision.compute_dtype(FLAGS.precision))

    def sample():  # the matmul rates between two rounds
        return (rounds_lib.sample_rates(peak.gflops, rounds_lib.PEAK_SECONDS) if with_peak
                else [])

    rates = {name: [] for name in sides}
    cpu_rates = {name: [] for name in sides}
    windows = [sample()]
    for round_index in range(FLAGS.rounds):
        for name in rounds_lib.rotated(list(sides), round_index):
            rate, cpu_rate = _images_per_second(sides[name], FLAGS.steps_per_round,
                                                batch_size)
            rates[name].append(rate)
            cpu_rates[name].append(cpu_rate)
        windows.append(sample())
    return rates, cpu_rates, rounds_lib.round_peaks(windows) if with_peak else []


def _of_peak(rates, gflops, peaks):
    """'median [min, max]' over rounds of a side's 3 x forward FLOPs x img/s (forward
    and backward) against the same round's matmul peak."""
    fractions = [3 * gflops * rate / round_peak for rate, round_peak in zip(rates, peaks)]
    return (f'{statistics.median(fractions):.2f} [{min(fractions):.2f}, '
            f'{max(fractions):.2f}]')


def _paired_ratio(rates, name, other):
    """'median [min, max]' over rounds of ours / other in the same round (robust to
    load drift)."""
    ratios = [a / b for a, b in zip(rates[name], rates[other])]
    return f'{statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]'


def _model_sizes(model_name, image_shape, num_classes):
    """(forward GFLOP per image, trainable parameters) of ours and of the Keras
    counterpart. FLOPs: nets.flops, convolutions and matrix products of the traced graph,
    2 per multiply-add."""
    network = nets_factory.get_network_fn(model_name, num_classes)
    network.build(image_shape)
    model = KERAS_COUNTERPARTS[model_name][0](num_classes, image_shape)
    count = lambda variables: sum(int(np.prod(v.shape)) for v in variables)  # noqa: E731
    return ((flops.network_forward_flops(network, image_shape) / 1e9,
             flops.forward_flops(lambda x: model(x, training=False), image_shape) / 1e9),
            (count(network.trainable_variables), count(model.trainable_weights)))


def _sides(model_name, input_fn, image_shape, num_classes, batch_size, train_dir,
           which=None):
    builder = KERAS_COUNTERPARTS[model_name][0]
    makers = {
        'ours': lambda: ours(model_name, input_fn, image_shape, num_classes, batch_size,
                             train_dir, FLAGS.precision),
        # Ours in float32 whatever --precision: the speed-up of a low precision.
        'ours_float32': lambda: ours(model_name, input_fn, image_shape, num_classes,
                                     batch_size, train_dir + '/float32'),
        'keras': lambda: keras_step(builder, input_fn, image_shape, num_classes),
        'keras_fit': lambda: keras_fit(builder, input_fn, image_shape, num_classes)}
    return {name: makers[name]() for name in (which or FLAGS.sides)}


def main(argv):
    del argv
    tf.keras.mixed_precision.set_global_policy(FLAGS.precision)  # same names as ours
    print(f'TensorFlow {tf.__version__}, {os.cpu_count()} CPUs, precision {FLAGS.precision}, '
          f'glibc malloc tuning {"on" if startup.MALLOC_TUNED else "off"} (every side); '
          f'rounds={FLAGS.rounds}, steps_per_round={FLAGS.steps_per_round}, '
          f'warmup={FLAGS.warmup_steps}, data: '
          f'{FLAGS.dataset_dir and FLAGS.dataset_name or "synthetic"}', flush=True)
    rows = []
    for model_name in FLAGS.models:
        _, batch_size, num_classes = KERAS_COUNTERPARTS[model_name]
        batch_size = FLAGS.batch_size or batch_size
        with tempfile.TemporaryDirectory() as train_dir:
            waiting = None
            if FLAGS.dataset_dir:
                input_fn, image_shape, num_classes = _real_input_fn(model_name, batch_size)
                rates, cpu_rates, peaks = _measure(
                    _sides(model_name, input_fn, image_shape, num_classes, batch_size,
                           train_dir), batch_size)
                if 'ours' in rates:  # our step on a synthetic batch of the same shape
                    synthetic, _, _ = _measure(_sides(
                        model_name, _synthetic_input_fn(batch_size, image_shape,
                                                        num_classes),
                        image_shape, num_classes, batch_size, train_dir + '/synthetic',
                        which=['ours']), batch_size, with_peak=False)
                    waiting = max(0.0, 1 - statistics.median(rates['ours'])
                                  / statistics.median(synthetic['ours']))
            else:
                size = (FLAGS.image_size
                        or nets_factory.get_spec(model_name).default_image_size)
                image_shape = (size, size, 3)
                rates, cpu_rates, peaks = _measure(_sides(
                    model_name, _synthetic_input_fn(batch_size, image_shape, num_classes),
                    image_shape, num_classes, batch_size, train_dir), batch_size)
        gflops, parameters = _model_sizes(model_name, image_shape, num_classes)
        rows.append((model_name, batch_size, image_shape, rates, cpu_rates, waiting,
                     gflops, parameters, peaks))
        print(f'{model_name}: ' + '; '.join(
            f'{name} {[round(r, 1) for r in values]}' for name, values in rates.items())
            + ' img/s', flush=True)
    names = list(FLAGS.sides)
    others = [n for n in names if n != 'ours'] if 'ours' in names else []
    print('\nimg/s: median over rounds; ours / X: per-round ratios, median [min, max], '
          'by wall clock and per CPU-second of this process; forward GFLOP per image of '
          'ours and of the Keras model, and their trainable parameters; of peak: 3 x '
          'forward FLOPs x img/s against the round\'s matmul peak, the fastest matmul in '
          '2 s before and after it (median [min, max], GFLOP/s); round i starts with '
          'side i mod n.')
    print('\n| model | batch | size | ' + ' | '.join(f'{n} img/s' for n in names) + ' | '
          + ' | '.join(f'ours / {n} | ours / {n} per CPU-s' for n in others)
          + ' | GFLOP/img ours, Keras | parameters ours, Keras | '
          + ' | '.join(f'{n} of peak' for n in names) + ' | matmul peak'
          + (' | input wait |' if FLAGS.dataset_dir else ' |'))
    print('|---' * (6 + 2 * len(names) + 2 * len(others) + bool(FLAGS.dataset_dir)) + '|')
    for (model_name, batch_size, image_shape, rates, cpu_rates, waiting, gflops,
         parameters, peaks) in rows:
        cells = [f'{statistics.median(rates[n]):.1f}' for n in names]
        cells += [f'{_paired_ratio(rates, "ours", n)} | {_paired_ratio(cpu_rates, "ours", n)}'
                  for n in others]
        cells.append(f'{gflops[0]:.4g}, {gflops[1]:.4g}')
        cells.append(f'{parameters[0]:,}, {parameters[1]:,}')
        cells += [_of_peak(rates[n], gflops[0 if n.startswith('ours') else 1], peaks)
                  for n in names]
        cells.append(f'{statistics.median(peaks):.0f} [{min(peaks):.0f}, '
                     f'{max(peaks):.0f}]')
        if FLAGS.dataset_dir:
            cells.append('n/a' if waiting is None else f'{waiting:.0%}')
        print(f'| {model_name} | {batch_size} | {image_shape[0]} | ' + ' | '.join(cells)
              + ' |')


if __name__ == '__main__':
    app.run(main)
