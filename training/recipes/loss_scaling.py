"""Dynamic loss scaling for float16 training: small gradients survive float16's range.

The loss is multiplied by `scale` before the backward pass and the gradients divided
by it after. A step whose gradients are not all finite is skipped and the scale
halved; after `growth_interval` finite steps in a row it doubles. Both counters are
variables, so the scale is saved in and restored from checkpoints.
"""
import tensorflow as tf


class DynamicLossScale(tf.Module):

    def __init__(self, initial_scale: float = 2.0 ** 15, growth_interval: int = 2000,
                 factor: float = 2.0):
        super().__init__(name='loss_scale')
        self.growth_interval = growth_interval
        self.factor = factor
        # ON_WRITE + ONLY_FIRST_REPLICA: every replica computes the same update from
        # the same aggregated gradients.
        options = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_WRITE,
                       aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.scale = tf.Variable(initial_scale, dtype=tf.float32, name='current_loss_scale',
                                 **options)
        self.good_steps = tf.Variable(0, dtype=tf.int64, name='good_steps', **options)

    def scale_loss(self, loss):
        return loss * tf.cast(self.scale, loss.dtype)

    def unscale(self, gradients):
        inverse = 1.0 / self.scale
        return [None if g is None else g * tf.cast(inverse, g.dtype) for g in gradients]

    def update(self, gradients):
        """Adjusts the scale for these (aggregated) gradients; returns whether they are
        all finite, i.e. whether the step may be applied."""
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g))
                                for g in gradients if g is not None])
        grow = tf.logical_and(finite, self.good_steps + 1 >= self.growth_interval)
        new_scale = tf.where(finite, tf.where(grow, self.scale * self.factor, self.scale),
                             tf.maximum(self.scale / self.factor, 1.0))
        new_good_steps = tf.where(tf.logical_and(finite, tf.logical_not(grow)),
                                  self.good_steps + 1, tf.constant(0, tf.int64))
        with tf.control_dependencies([self.scale.assign(new_scale),
                                      self.good_steps.assign(new_good_steps)]):
            return tf.identity(finite)
