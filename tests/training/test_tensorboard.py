"""TensorBoard depth, unit level: histogram buckets (training.summaries.capture), the
in-step capture on one device, 2 CPU clones with gradient accumulation and XLA (and
that it stays out of checkpoints), the labelled confusion matrix
(training.summaries.confusion_image, training.summaries.eval_summaries) and the run's flags as HParams
(cli.run_record). The scripts' flow is tests/e2e/test_tensorboard_flow.py."""
import numpy as np
import pytest
import tensorflow as tf
from absl import flags
from helpers import image_text
from tensorboard.plugins.hparams import metadata as hparams_metadata

from cli import run_record
from core import pixel_font
from nets import nets_factory
from training.summaries import confusion_image
from training.summaries import eval_summaries
from training.recipes import learning_rate as lr_config
from training.recipes import optimizers
from training.summaries import capture as capture_lib
from training.loop import trainer as trainer_lib

SHAPE_NAMES = ['circle', 'square', 'triangle', 'cross', 'ring', 'star', 'hexagon',
               'diamond', 'heart', 'pentagon']


def _events(directory):
    """[(tag, plugin name, step, tensor proto)] of every summary in directory's events."""
    found = []
    for path in sorted(tf.io.gfile.glob(f'{directory}/events.out.tfevents.*')):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                found.append((value.tag, value.metadata.plugin_data.plugin_name,
                              event.step, value.tensor))
    return found


# --- histogram_buckets ---------------------------------------------------------------

@pytest.mark.parametrize('values', [
    # Integers from 0 to 30: every bucket edge holds values, the maximum closes the last.
    np.repeat(np.arange(31), np.arange(31) % 4 + 1).astype(np.float32),
    # Fixed reals, none within 1e-3 bucket widths of an edge.
    np.array([-2.5, -2.25, -1.0, -0.4, 0.0, 0.0, 0.1, 0.3, 0.33, 1.7, 2.0, 2.9, 3.5],
             np.float32).reshape(13, 1),
])
def test_histogram_buckets_match_numpy(values):
    buckets = capture_lib.histogram_buckets(tf.constant(values)).numpy()
    counts, edges = np.histogram(values, bins=capture_lib.HISTOGRAM_BUCKETS)
    assert buckets.shape == (capture_lib.HISTOGRAM_BUCKETS, 3)
    np.testing.assert_array_equal(buckets[:, 2], counts)
    np.testing.assert_allclose(buckets[:, 0], edges[:-1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(buckets[:, 1], edges[1:], rtol=1e-6, atol=1e-6)
    assert buckets[-1, 1] == values.max() and buckets[0, 0] == values.min()


def test_histogram_buckets_of_one_value_infinities_and_many_values():
    # One value: all in the last bucket, as TensorBoard's own histogram puts it.
    single = capture_lib.histogram_buckets(tf.fill([7], 2.5)).numpy()
    assert single[:, :2].min() == single[:, :2].max() == 2.5
    assert single[:, 2].tolist() == [0] * 29 + [7]
    # A float16 overflow: the finite values are counted, the edges stay finite.
    overflowed = capture_lib.histogram_buckets(
        tf.constant([1.0, np.inf, -np.inf, np.nan, 4.0], tf.float16)).numpy()
    assert np.isfinite(overflowed).all() and overflowed[:, 2].sum() == 2
    assert (overflowed[0, 0], overflowed[-1, 1]) == (1.0, 4.0)
    assert capture_lib.histogram_buckets(tf.constant([np.nan])).numpy()[:, 2].sum() == 0
    # More values than a float32 sum of ones counts (2**24).
    many = capture_lib.histogram_buckets(tf.zeros([2**24 + 3])).numpy()
    assert many[:, 2].sum() == 2**24 + 3


# --- the capture inside the step -----------------------------------------------------

def _trainer(strategy, train_dir, batch_size, **config):
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (16, 28, 28, 1)).astype(np.float32)
    labels = rng.integers(0, 10, 16).astype(np.int64)
    with strategy.scope():
        network = nets_factory.get_network_fn('lenet', 10, is_training=True,
                                              dropout_keep_prob=1.0)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig('momentum'))
    return trainer_lib.Trainer(
        strategy=strategy, network=network, optimizer=optimizer,
        learning_rate_fn=lr_config.create_learning_rate_fn(
            lr_config.LearningRateConfig('fixed', learning_rate=0.01), 1000, batch_size),
        input_fn=lambda context=None: tf.data.Dataset.from_tensor_slices(
            (images, labels)).batch(batch_size, drop_remainder=True).repeat(),
        image_shape=(28, 28, 1),
        config=trainer_lib.TrainConfig(train_dir=str(train_dir), batch_size=batch_size,
                                      max_number_of_steps=5, log_every_n_steps=2,
                                      save_summaries_secs=0, **config))


def _variables_of(trackables):
    """Every tf.Variable among trackables, distributed ones with their components."""
    found = set()
    for trackable in trackables:
        if isinstance(trackable, tf.distribute.DistributedValues):
            found.update(id(value) for value in trackable.values)
        if isinstance(trackable, (tf.Variable, tf.distribute.DistributedValues)):
            found.add(id(trackable))
    return found


@pytest.mark.parametrize('mode', ['one_device', 'two_clones_accumulating', 'xla'])
def test_capture_fills_on_the_armed_step_and_stays_out_of_checkpoints(tmp_path, mode):
    if mode == 'two_clones_accumulating':
        # As deployment.model_deploy makes clones (collectives of several strategies in
        # one process can collide).
        strategy = tf.distribute.MirroredStrategy(
            ['/cpu:0', '/cpu:1'], cross_device_ops=tf.distribute.ReductionToOneDevice())
        trainer = _trainer(strategy, tmp_path, 4, gradient_accumulation_steps=2)
    else:
        trainer = _trainer(tf.distribute.get_strategy(), tmp_path, 8,
                           jit_compile=mode == 'xla')
    trainer.train()  # calls of 1, 1, 2 and 1 steps, each with a summary
    capture = trainer.model_step.summary_capture
    held = capture.captured(trainer.strategy)
    assert held['gradients_step'] == held['activations_step'] == 4  # the last step's
    # Each gradient's histogram counts the variable's every element.
    sizes = [v.shape.num_elements() for v in trainer.model_step.train_variables]
    assert held['gradient_histograms'][:, :, 2].sum(axis=1).tolist() == sizes
    assert (held['gradient_norms'] > 0).all()
    # Activations of the micro-batch the first replica ran last (4 examples per micro-
    # batch and replica with clones, 8 on one device).
    per_replica = 4 if mode == 'two_clones_accumulating' else 8
    assert capture.end_point_names[0] == 'conv1'
    assert held['activation_histograms'][0, :, 2].sum() == per_replica * 28 * 28 * 32
    assert 0 < held['zero_fractions'][0] < 1  # relu: some zeros, not all
    # What the writer wrote of them.
    tags = {(tag, plugin) for tag, plugin, _, _ in _events(tmp_path)}
    assert {('LeNet/conv1/weights', 'histograms'),
            ('LeNet/conv1/weights/gradient', 'histograms'),
            ('LeNet/conv1/weights/gradient_norm', 'scalars'),
            ('activations/conv1', 'histograms'), ('sparsity/conv1', 'scalars'),
            ('images', 'images')} <= tags
    # The capture's variables are not part of what a checkpoint saves.
    saved = _variables_of(tf.train.TrackableView(trainer.checkpoint).descendants())
    captured = _variables_of(getattr(capture, name) for name in (
        'capture_step', 'gradients_step', 'gradient_histograms', 'gradient_norms',
        'activations_step', 'activation_histograms', 'zero_fractions'))
    assert len(captured) >= 7 and not saved & captured
    assert _variables_of(trainer.network.variables) <= saved


# --- the confusion matrix ------------------------------------------------------------

def test_confusion_image_draws_the_class_names_and_counts():
    confusion = np.diag(np.arange(50, 60)) + np.eye(10, k=1, dtype=int) * 3
    image = confusion_image.confusion_image(confusion, SHAPE_NAMES)
    assert image.dtype == np.uint8 and image.shape[0] == 1 and image.shape[3] == 3
    picture = image[0]
    scale = 2  # up to 12 classes
    for index, name in enumerate(SHAPE_NAMES):
        assert len(image_text.find_text(picture, f'{index} {name}', scale)) == 1, name
    assert image_text.find_text(picture, 'predicted', scale)
    assert image_text.find_text(picture, 'true class', scale)
    assert not image_text.find_text(picture, '3 circle', scale)  # not just any ink
    # The diagonal's counts on dark cells in white, the off-diagonal 3s in black.
    assert len(image_text.find_text(picture, '59', scale, color=(255, 255, 255))) == 1
    assert len(image_text.find_text(picture, '3', scale)) >= 9
    # Far larger than the bare 10 x 10 matrix: room for the labels and counts.
    assert picture.shape[0] > 10 * pixel_font.GLYPH_HEIGHT * scale
    assert picture.shape[1] > pixel_font.text_width('9 pentagon', scale) + 10 * 20


def test_long_names_are_shortened_and_small_scale_is_used_above_12_classes():
    names = [f'class_{i}_with_a_very_long_name' for i in range(20)]
    picture = confusion_image.confusion_image(np.eye(20, dtype=int) * 5, names)[0]
    shortened = '7 ' + names[7][:confusion_image.MAX_NAME_LENGTH - 2] + '..'
    assert len(image_text.find_text(picture, shortened, 1)) == 1


def _written(tmp_path, num_classes):
    rng = np.random.default_rng(0)
    confusion = rng.integers(0, 5, (num_classes, num_classes)) + np.eye(num_classes,
                                                                        dtype=int) * 20
    names = [f'n{i}' for i in range(num_classes)]
    names[1] = 'a|b'  # a table cell's separator, escaped
    eval_summaries.write(str(tmp_path), 42, {'Accuracy': 0.5}, confusion, names)
    return confusion, {tag: (plugin, step, tensor)
                       for tag, plugin, step, tensor in _events(tmp_path)}


def test_eval_writes_the_labelled_image_and_the_per_class_table(tmp_path):
    confusion, written = _written(tmp_path, confusion_image.MAX_LABELLED_CLASSES)
    assert set(written) == {'eval/Accuracy', 'eval/confusion_matrix', 'eval/per_class'}
    plugin, step, tensor = written['eval/confusion_matrix']
    assert (plugin, step) == ('images', 42)
    width, height = (int(v) for v in tensor.string_val[:2])
    assert width > 30 * 12 and height > 30 * 12
    plugin, _, tensor = written['eval/per_class']
    table = tensor.string_val[0].decode().splitlines()
    assert plugin == 'text' and len(table) == 2 + 30
    hits, total = confusion[1, 1], confusion[1].sum()
    assert table[3].startswith(f'| 1 | a\\|b | {total} | {hits / total:.4f} | ')


def test_eval_writes_only_the_table_above_30_classes(tmp_path):
    _, written = _written(tmp_path, confusion_image.MAX_LABELLED_CLASSES + 1)
    assert set(written) == {'eval/Accuracy', 'eval/per_class'}
    assert len(written['eval/per_class'][2].string_val[0].decode().splitlines()) == 2 + 31


# --- HParams ---------------------------------------------------------------------------

def _script_flags():
    values = flags.FlagValues()
    kwargs = dict(flag_values=values, module_name='train_image_classifier.py')
    flags.DEFINE_string('model_name', 'inception_v3', '', **kwargs)
    flags.DEFINE_float('learning_rate', 0.01, '', **kwargs)
    flags.DEFINE_integer('max_number_of_steps', None, '', **kwargs)
    flags.DEFINE_bool('clone_on_cpu', False, '', **kwargs)
    flags.DEFINE_list('trainable_scopes', [], '', **kwargs)
    flags.DEFINE_multi_integer('top_k', [1, 5], '', **kwargs)
    flags.DEFINE_enum('optimizer', 'rmsprop', ['rmsprop', 'sgd'], '', **kwargs)
    values(['train_image_classifier.py', '--model_name=cifarnet', '--learning_rate=0.5',
            '--trainable_scopes=CifarNet/logits,CifarNet/fc4'])
    return values


def test_hparams_hold_every_set_flag_in_a_type_tensorboard_takes(tmp_path, monkeypatch):
    recorded = run_record.flags_record(_script_flags(), 'train_image_classifier.py')
    # Writing them needs no TensorFlow runtime: the deployment configures devices later.
    from tensorflow.python.eager import context

    def refuse(*args, **kwargs):
        raise AssertionError('write_hparams started the TensorFlow runtime')
    monkeypatch.setattr(context.Context, 'ensure_initialized', refuse)
    run_record.write_hparams(str(tmp_path), recorded)
    monkeypatch.undo()
    (tag, plugin, step, _), = _events(tmp_path)
    assert (tag, plugin, step) == (hparams_metadata.SESSION_START_INFO_TAG, 'hparams', 0)
    path, = tf.io.gfile.glob(f'{tmp_path}/events.out.tfevents.*')
    event = [e for e in tf.compat.v1.train.summary_iterator(path) if e.summary.value][0]
    start = hparams_metadata.parse_session_start_info_plugin_data(
        event.summary.value[0].metadata.plugin_data.content)
    values = {name: getattr(value, value.WhichOneof('kind'))
              for name, value in start.hparams.items()}
    # max_number_of_steps (None) has no value; lists read as on the command line.
    assert values == {'model_name': 'cifarnet', 'learning_rate': 0.5,
                      'clone_on_cpu': False, 'trainable_scopes': 'CifarNet/logits,CifarNet/fc4',
                      'top_k': '1,5', 'optimizer': 'rmsprop'}


def test_hparams_summary_is_the_one_tensorboard_makes():
    """Built from the plugin's protos (its summary module costs start-up time): the same
    bytes as tensorboard.plugins.hparams.summary_v2.hparams_pb."""
    from tensorboard.plugins.hparams import summary_v2
    values = {'model_name': 'cifarnet', 'learning_rate': 0.5, 'clone_on_cpu': False,
              'max_number_of_steps': 1000, 'top_k': '1,5'}
    ours = run_record.hparams_summary(values, start_time_secs=1234.5)
    theirs = summary_v2.hparams_pb(values, start_time_secs=1234.5)
    # Compared parsed: the plugin data holds a proto map, whose serialized order is not
    # fixed (the bytes differed in one run of ten).
    content = [hparams_metadata.parse_session_start_info_plugin_data(
        summary.value[0].metadata.plugin_data.content) for summary in (ours, theirs)]
    assert content[0] == content[1]
    for summary in (ours, theirs):
        summary.value[0].metadata.plugin_data.content = b''
    assert ours == theirs
