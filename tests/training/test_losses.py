import numpy as np
import pytest
import tensorflow as tf

from nets import nets_factory
from training.recipes import losses


def test_label_smoothing_matches_slim_formula():
    logits = tf.constant([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3]])
    labels = tf.constant([0, 2])
    smoothing = 0.1
    targets = np.eye(3)[[0, 2]] * (1 - smoothing) + smoothing / 3
    log_probs = logits.numpy() - np.log(np.exp(logits.numpy()).sum(-1, keepdims=True))
    expected = -(targets * log_probs).sum(-1).mean()
    assert float(losses.softmax_cross_entropy(logits, labels, smoothing)) == \
        pytest.approx(expected, rel=1e-6)


def test_losses_include_weight_decay_and_aux_head():
    network = nets_factory.get_network_fn('lenet', 10, weight_decay=0.01)
    network.build((28, 28, 1))
    logits = tf.zeros([2, 10])
    end_points = {'AuxLogits': tf.zeros([2, 10])}
    terms = losses.compute_losses(logits, end_points, tf.constant([1, 2]), network, 0.0)
    assert float(terms['cross_entropy']) == pytest.approx(np.log(10), rel=1e-6)
    assert float(terms['aux_cross_entropy']) == pytest.approx(0.4 * np.log(10), rel=1e-6)
    assert float(terms['regularization']) == pytest.approx(
        float(tf.add_n(network.regularization_losses())))




def test_low_precision_logits_give_a_float32_loss():
    logits = tf.constant([[2.0, 0.5, -1.0]], tf.bfloat16)
    loss = losses.softmax_cross_entropy(logits, tf.constant([0]), 0.0)
    assert loss.dtype == tf.float32
    assert float(loss) == pytest.approx(
        float(losses.softmax_cross_entropy(tf.cast(logits, tf.float32), [0], 0.0)))
