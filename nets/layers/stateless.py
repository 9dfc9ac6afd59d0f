"""Layers without variables, in any compute dtype: pools, flatten, dropout."""
import math
from typing import Optional

import tensorflow as tf

from nets.layers.weighted import IntTuple, as_tuple


def max_pool(inputs, kernel_size: IntTuple, stride: IntTuple = 2, padding='VALID'):
    """slim's max_pool2d / max_pool3d, by the input's rank."""
    rank = inputs.shape.rank - 2
    return tf.nn.max_pool(inputs, as_tuple(kernel_size, rank), as_tuple(stride, rank), padding)


def avg_pool(inputs, kernel_size: IntTuple, stride: IntTuple = 2, padding='VALID'):
    """slim's avg_pool2d / avg_pool3d, by the input's rank."""
    rank = inputs.shape.rank - 2
    return tf.nn.avg_pool(inputs, as_tuple(kernel_size, rank), as_tuple(stride, rank), padding)


def flatten(inputs):
    """Keeps the batch dimension, folds the rest (static size kept when known)."""
    return tf.reshape(inputs, [-1, math.prod(inputs.shape[1:])])


def random_seed(random_generator: Optional[tf.random.Generator]):
    """A seed for one stateless random op, drawn from `random_generator` (whose state a
    checkpoint holds, so a resumed run draws what an uninterrupted one would); None
    without a generator: the op then follows TensorFlow's global seed."""
    return None if random_generator is None else random_generator.make_seeds(1)[:, 0]


def dropout(inputs, keep_prob: float, *, training: bool,
            random_generator: Optional[tf.random.Generator] = None):
    """slim.dropout: in training, keeps each value with probability keep_prob (scaled
    by 1 / keep_prob); masks drawn from `random_generator` when given."""
    if not training or keep_prob >= 1.0:
        return inputs
    seed = random_seed(random_generator)
    if seed is not None:
        return tf.nn.experimental.stateless_dropout(inputs, rate=1.0 - keep_prob, seed=seed)
    return tf.nn.dropout(inputs, rate=1.0 - keep_prob)
