"""The random choices of training preprocessing, drawn from stateless ops.

Every draw is a function of the example's seed (a [2] integer tensor the input
pipeline makes from the run's --seed and the example's position in the stream), so a
run repeats its augmentation bit for bit, and a resumed run draws exactly what the
uninterrupted one drew. Without a seed (a caller outside the pipeline), one is drawn
from TensorFlow's global generator, which follows tf.random.set_seed.
"""
import tensorflow as tf


def seed_or_fresh(seed):
    """`seed`, or a fresh one from the global generator if None."""
    if seed is None:
        return tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
    return seed


def split(seed, count):
    """`count` independent [2] seeds from one example's seed (or a fresh one if None)."""
    return tf.unstack(tf.random.experimental.stateless_split(seed_or_fresh(seed), count))


def uniform(seed, minval, maxval, dtype=tf.float32):
    """One number uniform in [minval, maxval) (integers: maxval excluded)."""
    return tf.random.stateless_uniform([], seed, minval=minval, maxval=maxval, dtype=dtype)


def choice(seed, num_cases, make_case):
    """`make_case(k)()` for k uniform in [0, num_cases)."""
    if num_cases == 1:
        return make_case(0)()
    selector = uniform(seed, 0, num_cases, dtype=tf.int32)
    return tf.switch_case(selector, [make_case(k) for k in range(num_cases)])
