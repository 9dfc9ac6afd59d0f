import numpy as np
import pytest
import tensorflow as tf

from deployment import weight_factors
from nets import layers, nets_factory
from nets.layers.fake_quant import Quantization, QuantizationParams


@pytest.mark.parametrize('shape, rows, replicas, expected', [
    ((4096, 384), 32, 2, True),      # cifarnet's fc3: 0.57 MB of factors for 6.3 MB
    ((384, 192), 32, 2, True),       # cifarnet's fc4: exactly half
    ((192, 10), 32, 2, False),       # logits: the factors are larger
    ((7, 7, 512, 4096), 32, 16, True),  # VGG's fc6 as a conv over its whole input
    ((4096, 384), 32, 1, False),     # one replica: nothing crosses
    ((4096, 384), None, 2, False),   # rows unknown
])
def test_a_weight_is_factored_when_its_factors_are_at_most_half_its_size(
        shape, rows, replicas, expected):
    assert weight_factors.worth_factoring(shape, rows, replicas) == expected


def test_recorded_factors_and_the_tapes_rest_make_the_whole_gradient():
    """A fully connected layer and a conv covering its whole input (called twice, so
    its factors stack two calls' rows): factors plus the rest (weight decay) equal the
    gradient taken without a recording; layers not worth factoring are left alone."""
    fc = layers.FullyConnected('fc', 48, weight_decay=0.01)
    conv = layers.Conv2D('conv', 40, [1, 1], weight_decay=0.02, padding='VALID')
    small = layers.FullyConnected('small', 2)
    rng = np.random.default_rng(0)
    images = tf.constant(rng.standard_normal((3, 64)), tf.float32)

    def loss():
        hidden = fc(images, training=True)
        first = conv(tf.reshape(hidden, [3, 1, 1, 48]), training=True)
        second = conv(tf.reshape(hidden * 0.5, [3, 1, 1, 48]), training=True)
        logits = small(tf.reshape(first + second, [3, 40]), training=True)
        regularization = tf.add_n(fc.regularization_losses()
                                  + conv.regularization_losses())
        return tf.reduce_sum(tf.square(logits)) + regularization

    loss()  # builds the variables
    variables = [fc.weights, fc.biases, conv.weights, conv.biases, small.weights]
    with tf.GradientTape() as tape:
        plain_loss = loss()
    expected = tape.gradient(plain_loss, variables)

    tree = layers.Module('tree')
    tree.layers = [fc, conv, small]
    with tf.GradientTape() as tape:
        recording = weight_factors.Recording(variables, replicas=2, batch_size=3, tape=tape)
        with layers.recording_products(tree, recording):
            recorded_loss = loss()
    factored = recording.gradient(recorded_loss, variables)

    kinds = [isinstance(g, weight_factors.Factored) for g in factored]
    assert kinds == [True, False, True, False, False]
    assert factored[2].max_rows == 6  # two calls of three rows
    assert factored[2].inputs.shape == (6, 48)
    for variable, got, want in zip(variables, factored, expected):
        if isinstance(got, weight_factors.Factored):
            # The tape's own term is weight decay alone (slim's wd * sum(w^2) / 2): the
            # product's is stopped.
            np.testing.assert_allclose(got.rest, variable * (
                0.01 if variable is fc.weights else 0.02), rtol=1e-6)
            got = tf.reshape(tf.matmul(got.inputs, got.output_gradients, transpose_a=True),
                             variable.shape) + got.rest
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_without_a_recording_or_in_a_quantized_net_the_gradient_is_whole():
    quantized = layers.FullyConnected('fc', 48,
                                      quantization=Quantization(QuantizationParams()))
    images = tf.ones([2, 64])
    quantized(images, training=True)
    with tf.GradientTape() as tape:
        recording = weight_factors.Recording([quantized.weights], replicas=2, batch_size=2,
                                             tape=tape)
        with layers.recording_products(quantized, recording):
            quantized(images, training=True)
    assert recording.records == {}
    plain = layers.FullyConnected('plain', 48)
    plain(images, training=True)
    with tf.GradientTape() as tape:
        outputs = plain(images, training=True)
    assert tape.gradient(outputs, plain.weights) is not None


def test_a_recording_is_lent_for_one_call_and_calls_do_not_nest():
    fc = layers.FullyConnected('fc', 48)
    images = tf.ones([2, 64])
    fc(images, training=True)
    with tf.GradientTape() as tape:
        recording = weight_factors.Recording([fc.weights], replicas=2, batch_size=2,
                                             tape=tape)
        with layers.recording_products(fc, recording):
            with pytest.raises(RuntimeError, match='one call of the net at a time'):
                with layers.recording_products(fc, recording):
                    pass
            fc(images, training=True)
        fc(images, training=True)  # after the call: not recorded
    assert len(recording.records[fc.weights.ref()]) == 1


def test_a_nets_call_lends_its_recording_to_its_matmul_layers():
    """The recording reaches the net's layers as an argument of its call, and only
    for that call."""
    network = nets_factory.get_network_fn('cifarnet', 10, is_training=True)
    images = tf.ones([2, 32, 32, 3])
    network(images)
    fc3 = network.trainable_variables[[v.name for v in network.trainable_variables]
                                      .index('CifarNet/fc3/weights:0')]
    with tf.GradientTape() as tape:
        recording = weight_factors.Recording(network.trainable_variables, replicas=2,
                                             batch_size=2, tape=tape)
        network(images, product_recording=recording)
        network(images)
    assert [calls for ref, calls in recording.records.items() if ref == fc3.ref()]
    assert all(len(calls) == 1 for calls in recording.records.values())
