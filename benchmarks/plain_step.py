"""A plain training step for the benchmarks that train a net outside the toolkit's loop
(input waits, profiles): softmax cross-entropy, gradients, the optimizer's update."""
import tensorflow as tf


def make_train_step(network, optimizer):
    """A tf.function of (images, labels) training `network` one step; returns the loss."""
    @tf.function
    def step(images, labels):
        with tf.GradientTape() as tape:
            logits, _ = network(images, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels, logits))
        gradients = tape.gradient(loss, network.trainable_variables)
        optimizer.apply_gradients(zip(gradients, network.trainable_variables))
        return loss

    return step
