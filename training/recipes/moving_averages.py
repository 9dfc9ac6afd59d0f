"""Exponential moving averages of a network's variables, as TF1's
`tf.train.ExponentialMovingAverage(decay, num_updates=global_step)` kept them for slim's
`--moving_average_decay`."""
from typing import Sequence

import tensorflow as tf

from core.naming import slim_name

SHADOW_SUFFIX = 'ExponentialMovingAverage'  # TF1's name: '<variable>/ExponentialMovingAverage'


class ExponentialMovingAverage(tf.Module):
    """One shadow per variable, starting at its value; create it under strategy.scope().

    Shadows are a list in the order of `variables`, so a checkpoint's 'ema/shadows/<i>'
    is the average of the i-th variable (checkpoints.restore_network relies on it).
    """

    def __init__(self, decay: float, variables: Sequence[tf.Variable]):
        super().__init__(name='ExponentialMovingAverage')
        if not 0.0 < decay < 1.0:
            raise ValueError(f'moving_average_decay must be in (0, 1), got {decay}.')
        self.decay = decay
        # References, not the variables: the checkpoint already holds those.
        self._sources = [v.ref() for v in variables]
        self.shadows = [
            tf.Variable(v.read_value(), trainable=False,
                        name=f'{slim_name(v)}/{SHADOW_SUFFIX}') for v in variables]

    def update(self, num_updates):
        """shadow -= (1 - d) * (shadow - variable), d = min(decay, (1 + n) / (10 + n))."""
        num_updates = tf.cast(num_updates, tf.float32)
        decay = tf.minimum(self.decay, (1.0 + num_updates) / (10.0 + num_updates))
        for shadow, source in zip(self.shadows, self._sources):
            variable = source.deref()
            shadow.assign_sub((1.0 - tf.cast(decay, shadow.dtype)) *
                              (shadow - tf.convert_to_tensor(variable)))
