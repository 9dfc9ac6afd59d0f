"""Layers without variables, in any compute dtype: pools, flatten, dropout, drop-path."""
import math
from typing import List, Optional, Sequence

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


# --- Drop-path (stochastic depth: Huang et al. 2016, arXiv 1603.09382). ---

def drop_path(inputs, keep_prob, random_generator: Optional[tf.random.Generator] = None):
    """Zeroes whole examples with probability 1 - keep_prob and scales the rest by
    1 / keep_prob (slim's drop_path, timm's DropPath); callers apply it in training
    only. keep_prob may be a tensor (NASNet's schedule follows the step). The mask is
    drawn in float32 whatever the input's dtype (a bfloat16 uniform's 8 bits would skew
    the keep probability), from `random_generator` when given."""
    keep_prob = tf.cast(keep_prob, tf.float32)
    noise_shape = [tf.shape(inputs)[0]] + [1] * (inputs.shape.rank - 1)
    seed = random_seed(random_generator)
    noise = (tf.random.uniform(noise_shape, dtype=tf.float32) if seed is None
             else tf.random.stateless_uniform(noise_shape, seed, dtype=tf.float32))
    mask = tf.floor(keep_prob + noise)  # 1 with probability keep_prob
    return inputs * tf.cast(mask / keep_prob, inputs.dtype)


def drop_path_rates(drop_path_rate: float, num_blocks: int) -> List[float]:
    """Stochastic depth's linear rule, as timm's ResNet: residual block i of n (from 0,
    in forward order) drops its branch with probability drop_path_rate * i / (n - 1),
    so the first block never and the last with drop_path_rate (torch.linspace(0, rate,
    n)); a lone block gets 0."""
    if not 0.0 <= drop_path_rate < 1.0:
        raise ValueError(f'drop_path_rate must be in [0, 1), got {drop_path_rate!r}.')
    if num_blocks == 1:
        return [0.0]
    return [drop_path_rate * i / (num_blocks - 1) for i in range(num_blocks)]


def schedule_drop_path(residual_blocks: Sequence, drop_path_rate: float):
    """Sets each block's `drop_path_rate` by `drop_path_rates`; blocks in forward order."""
    for block, rate in zip(residual_blocks, drop_path_rates(drop_path_rate,
                                                            len(residual_blocks))):
        block.drop_path_rate = rate


def stochastic_depth(branch, drop_rate: float, *, training: bool,
                     random_generator: Optional[tf.random.Generator] = None):
    """A residual branch before its add: through drop_path in training, itself at
    evaluation or at rate 0 (no op added, so a net without stochastic depth keeps its
    graph and draws nothing from the generator)."""
    if not training or drop_rate <= 0.0:
        return branch
    return drop_path(branch, 1.0 - drop_rate, random_generator)
