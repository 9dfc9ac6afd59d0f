"""Quantization-aware training in the layer kit: fake-quantized weights and activations,
ranges learned and checkpointed, the delay, and an int8 TFLite model on those ranges."""
import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils

from core.naming import slim_name
from export import exporter, tflite
from nets import layers, nets_factory, quantization
from nets.network import Network


class TinyNet(Network):
    """conv (per-channel weights) -> fc (per-tensor weights), no dropout."""

    def __init__(self, quantization=None):
        super().__init__(scope='Tiny', num_classes=3, is_training=True,
                         quantization=quantization)
        self.conv = layers.Conv2D('conv', 4, 3, stride=2, quantization=self.quantization)
        self.fc = layers.FullyConnected('fc', 3, activation=None,
                                        quantization=self.quantization)

    def forward(self, images, *, training, random_generator=None):
        net = self.conv(images, training=training)
        return self.fc(layers.flatten(net), training=training), {}


def _twin_nets(delay):
    """A quantization-aware TinyNet and a float one with the same weights."""
    quantized, plain = TinyNet(quantization.QuantizationParams(delay)), TinyNet()
    quantized.build((8, 8, 3))
    plain.build((8, 8, 3))
    for source, target in zip(plain.trainable_variables, quantized.trainable_variables):
        target.assign(source)
    return quantized, plain


def test_weights_take_a_symmetric_int8_grid_per_output_channel():
    rng = np.random.default_rng(0)
    weights = tf.constant(rng.normal(size=(3, 3, 4, 5)) * [1, 10, 0.1, 3, 0.5], tf.float32)
    quantized = quantization.fake_quantize_weights(weights).numpy()
    for channel in range(5):
        original = weights.numpy()[..., channel]
        scale = np.abs(original).max() / 127
        steps = quantized[..., channel] / scale
        np.testing.assert_allclose(steps, np.round(steps), atol=1e-3)
        assert np.abs(steps).max() == pytest.approx(127, abs=1e-3)
        assert np.abs(quantized[..., channel] - original).max() <= scale / 2 + 1e-6
    per_tensor = quantization.fake_quantize_weights(weights, per_channel=False).numpy()
    steps = per_tensor / (np.abs(weights.numpy()).max() / 127)
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-3)


def test_weight_gradient_passes_straight_through():
    weights = tf.Variable(tf.random.normal([3, 3, 2, 4]))
    upstream = tf.random.normal([3, 3, 2, 4])
    for per_channel in (True, False):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(quantization.fake_quantize_weights(
                weights, per_channel=per_channel) * upstream)
        np.testing.assert_allclose(tape.gradient(loss, weights).numpy(), upstream.numpy())


def test_activation_range_starts_at_the_first_batch_then_moves_slowly():
    quantizer = quantization.ActivationQuantizer(
        quantization.Quantization(quantization.QuantizationParams(range_decay=0.9)))
    first = tf.constant([[-1.0, 0.5, 2.0]])
    quantizer(first, training=True)
    assert (quantizer.min.numpy(), quantizer.max.numpy()) == (-1.0, 2.0)
    quantizer(tf.constant([[1.0, 4.0]]), training=True)  # min widened to 0
    assert quantizer.min.numpy() == pytest.approx(-0.9)
    assert quantizer.max.numpy() == pytest.approx(0.9 * 2.0 + 0.1 * 4.0)
    quantizer(tf.constant([[-50.0, 50.0]]), training=False)  # inference: no tracking
    assert quantizer.max.numpy() == pytest.approx(2.2)
    assert [v.trainable for v in (quantizer.min, quantizer.max)] == [False, False]


def test_activations_are_clipped_to_their_range_with_no_gradient_outside():
    quantizer = quantization.ActivationQuantizer(
        quantization.Quantization(quantization.QuantizationParams()))
    quantizer(tf.constant([0.0, 1.0]), training=True)  # range [0, 1]
    values = tf.constant(np.linspace(-0.5, 1.5, 101), tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(values)
        outputs = quantizer(values, training=False)
    gradient = tape.gradient(outputs, values).numpy()
    assert outputs.numpy().min() == 0.0 and outputs.numpy().max() == pytest.approx(1.0)
    steps = outputs.numpy() * 255
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-3)
    inside = (values.numpy() >= 0) & (values.numpy() <= 1)
    np.testing.assert_array_equal(gradient, inside.astype(np.float32))


def test_fake_quantization_starts_at_the_delay_in_training_and_is_on_at_inference():
    quantized, plain = _twin_nets(delay=5)
    images = tf.random.stateless_normal([4, 8, 8, 3], seed=[1, 2])
    before = quantized(images, training=True, step=tf.constant(4, tf.int64))[0]
    np.testing.assert_array_equal(before.numpy(), plain(images, training=True)[0].numpy())
    assert quantized.fc.act_quant.max.numpy() > quantized.fc.act_quant.min.numpy()
    after = quantized(images, training=True, step=tf.constant(5, tf.int64))[0].numpy()
    assert np.abs(after - plain(images, training=True)[0].numpy()).max() > 1e-4
    fc_range = quantized.fc.act_quant
    scale = (fc_range.max.numpy() - fc_range.min.numpy()) / 255
    inference = quantized(images, training=False)[0].numpy()
    steps = (inference - inference.min()) / scale  # on the logits' grid (nudged to 0)
    np.testing.assert_allclose(steps, np.round(steps), atol=2e-2)


def test_every_weighted_layer_gets_a_range_kept_in_checkpoints(tmp_path):
    net = nets_factory.get_network_fn('cifarnet', 10,
                                      quantization=quantization.QuantizationParams())
    net.build((32, 32, 3))
    ranges = sorted(slim_name(v) for v in net.variables if not v.trainable)
    assert ranges == sorted(f'CifarNet/{layer}/{end}' for end in ('min', 'max') for layer in
                            ['input_quant', 'conv1/act_quant', 'conv2/act_quant',
                             'fc3/act_quant', 'fc4/act_quant', 'logits/act_quant'])
    float_net = testing_utils.built_cifarnet()
    assert ([slim_name(v) for v in net.trainable_variables]
            == [slim_name(v) for v in float_net.trainable_variables])
    quantized_path = tf.train.Checkpoint(model=net).save(str(tmp_path / 'qat' / 'ckpt'))
    float_path = tf.train.Checkpoint(model=float_net).save(str(tmp_path / 'float' / 'ckpt'))
    assert quantization.is_quantization_aware(quantized_path)
    assert not quantization.is_quantization_aware(float_path)


def _weighted_layers(net):
    return list(net._flatten(predicate=lambda m: isinstance(m, layers.WeightedLayer)))


@pytest.mark.parametrize('name', nets_factory.network_names())
def test_every_net_gives_its_quantization_to_every_weighted_layer_it_makes(name):
    net = nets_factory.get_network_fn(name, 10, is_training=True,
                                      quantization=quantization.QuantizationParams())
    assert net.quantization is not None and net.input_quantizer is not None
    made = _weighted_layers(net)
    assert made and all(layer.quantization is net.quantization and layer.act_quant
                        for layer in made)
    assert not _weighted_layers(nets_factory.get_network_fn(name, 10))[0].act_quant


@pytest.mark.parametrize('name, options, size', [
    ('resnet_v1_50', {}, 64),  # shortcut convs, made on the first call
    ('nasnet_cifar', dict(num_cells=3, num_conv_filters=8), 32),  # cells, made so too
    ('inception_v3', dict(depth_multiplier=0.1), 139),  # AuxLogits/Conv2d_2a_*
])
def test_layers_made_on_the_first_call_are_quantized_too(name, options, size):
    net = nets_factory.get_network_fn(name, 10, is_training=True, **options,
                                      quantization=quantization.QuantizationParams())
    before = len(_weighted_layers(net))
    net(tf.zeros([2, size, size, 3]), step=0)
    made = _weighted_layers(net)
    assert len(made) > before
    assert all(layer.quantization is net.quantization for layer in made)
    ranges = {slim_name(v) for v in net.variables if quantization.is_range(slim_name(v))}
    assert len(ranges) == 2 * (len(made) + 1)  # min and max per layer, and the input's


def test_ranges_are_tracked_per_replica_under_mirrored_strategy():
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
    with strategy.scope():
        net = TinyNet(quantization.QuantizationParams(delay=1))
        net.build((8, 8, 3))
    images = tf.random.stateless_normal([4, 8, 8, 3], seed=[3, 4])
    dataset = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensors(images).unbatch().batch(4))

    @tf.function
    def step(batch):
        return strategy.run(lambda x: net(x, training=True, step=tf.constant(1, tf.int64))[0],
                            args=(batch,))

    step(next(iter(dataset)))
    assert net.input_quantizer.max.numpy() > 0 > net.input_quantizer.min.numpy()


def test_int8_tflite_model_takes_the_learned_ranges():
    net = TinyNet(quantization.QuantizationParams())
    net.build((8, 8, 3))
    net(tf.random.stateless_uniform([8, 8, 8, 3], seed=[5, 6], minval=-2, maxval=3),
        training=True)
    # Calibration images on another range: the learned ranges must win.
    calibration = np.random.default_rng(0).uniform(-0.1, 0.1, (8, 8, 8, 3)).astype(np.float32)
    model = tflite.convert(net, exporter.ServingInfo((8, 8, 3)), int8=True,
                           representative_images=calibration)
    interpreter = tflite.Interpreter(model_content=model)
    runner = interpreter.get_signature_runner(tflite.SIGNATURE)
    scale, zero_point = runner.get_input_details()[tflite.INPUT_NAME]['quantization']
    learned = net.input_quantizer
    assert scale == pytest.approx((learned.max.numpy() - learned.min.numpy()) / 255, rel=1e-5)
    assert zero_point == round(-learned.min.numpy() / scale)
    logits_scale, _ = runner.get_output_details()['logits']['quantization']
    fc_range = net.fc.act_quant
    assert logits_scale == pytest.approx(
        (fc_range.max.numpy() - fc_range.min.numpy()) / 255, rel=1e-5)


def test_a_float_checkpoint_starts_quantization_aware_fine_tuning(tmp_path):
    from training.checkpoints import restore
    float_net = testing_utils.built_cifarnet()
    path = tf.train.Checkpoint(model=float_net).save(str(tmp_path / 'model.ckpt'))
    net = nets_factory.get_network_fn('cifarnet', 10, is_training=True,
                                      quantization=quantization.QuantizationParams())
    net.build((32, 32, 3))
    restore.restore_network(net, path, fine_tuning=True)  # ranges: from the 1st batch
    np.testing.assert_array_equal(net.conv1.weights.numpy(), float_net.conv1.weights.numpy())
