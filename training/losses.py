"""The training loss, as slim's train_image_classifier built it, computed in float32."""
from typing import Dict

import tensorflow as tf

AUX_LOSS_WEIGHT = 0.4  # slim's weight for Inception's auxiliary head


def softmax_cross_entropy(logits, labels, label_smoothing: float):
    """Mean softmax cross-entropy against one-hot labels smoothed as slim smooths them.

    Logits of any dtype are cast to float32 first (bfloat16 loses the small
    differences the loss is made of).
    """
    logits = tf.cast(logits, tf.float32)
    num_classes = tf.shape(logits)[-1]
    targets = tf.one_hot(labels, num_classes, dtype=tf.float32)
    if label_smoothing:
        targets = targets * (1.0 - label_smoothing) + label_smoothing / tf.cast(
            num_classes, tf.float32)
    return tf.reduce_mean(
        tf.nn.softmax_cross_entropy_with_logits(labels=targets, logits=logits))


def compute_losses(logits, end_points, labels, network, label_smoothing) -> Dict:
    """{'cross_entropy', 'aux_cross_entropy' (nets with an aux head), 'regularization'}."""
    losses = {'cross_entropy': softmax_cross_entropy(logits, labels, label_smoothing)}
    if 'AuxLogits' in end_points:
        losses['aux_cross_entropy'] = AUX_LOSS_WEIGHT * softmax_cross_entropy(
            end_points['AuxLogits'], labels, label_smoothing)
    regularization = network.regularization_losses()
    if regularization:
        losses['regularization'] = tf.add_n(regularization)
    return losses
