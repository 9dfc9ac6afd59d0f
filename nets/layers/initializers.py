"""Initialisers, (shape, dtype) -> tensor: the ones TF-Slim's nets use."""
import math
from typing import Callable, Sequence

import tensorflow as tf

Initializer = Callable[[Sequence[int], tf.DType], tf.Tensor]


def zeros_initializer() -> Initializer:
    return lambda shape, dtype: tf.zeros(shape, dtype)


def ones_initializer() -> Initializer:
    return lambda shape, dtype: tf.ones(shape, dtype)


def constant_initializer(value: float) -> Initializer:
    return lambda shape, dtype: tf.fill(shape, tf.cast(value, dtype))


def truncated_normal_initializer(stddev: float) -> Initializer:
    """TF1's truncated normal: samples beyond 2 stddev redrawn, stddev not corrected."""
    return lambda shape, dtype: tf.random.truncated_normal(shape, stddev=stddev, dtype=dtype)


def xavier_initializer() -> Initializer:
    """Glorot uniform, slim's default for conv and fully_connected weights."""

    def initialize(shape, dtype):
        receptive_field = math.prod(shape[:-2]) if len(shape) > 2 else 1
        fan_in, fan_out = shape[-2] * receptive_field, shape[-1] * receptive_field
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return tf.random.uniform(shape, -limit, limit, dtype=dtype)

    return initialize


def variance_scaling_initializer(factor: float = 2.0, mode: str = 'FAN_IN',
                                 uniform: bool = False) -> Initializer:
    """TF1 contrib's variance_scaling_initializer (slim's Inception/ResNet default:
    factor 2, FAN_IN, a truncated normal of stddev sqrt(1.3 * factor / n))."""
    if mode not in ('FAN_IN', 'FAN_OUT', 'FAN_AVG'):
        raise ValueError(f"mode must be 'FAN_IN', 'FAN_OUT' or 'FAN_AVG', got {mode!r}.")

    def initialize(shape, dtype):
        receptive_field = math.prod(shape[:-2]) if len(shape) > 2 else 1
        fan_in = (shape[-2] if len(shape) > 1 else shape[-1]) * receptive_field
        fan_out = shape[-1] * receptive_field
        n = {'FAN_IN': fan_in, 'FAN_OUT': fan_out, 'FAN_AVG': (fan_in + fan_out) / 2}[mode]
        if uniform:
            limit = math.sqrt(3.0 * factor / n)
            return tf.random.uniform(shape, -limit, limit, dtype=dtype)
        return tf.random.truncated_normal(shape, stddev=math.sqrt(1.3 * factor / n),
                                          dtype=dtype)

    return initialize
