"""A learned position embedding on another grid of patches: bicubic, as timm's
`resample_abs_pos_embed` (torch's interpolate with antialias: the Keys cubic of
a = -0.5 on half-pixel centres, widened when shrinking), which tf.image.resize's bicubic
with antialias computes too. Tokens before the grid's (the class token's, register
tokens') are kept as they are.

Used by the net when it is called at another image size than its variable's grid, by
the timm importer (a file of another grid) and by restoring a checkpoint at another
size (fine-tuning at 384 from 224 weights, DINOv2's 518 grid at 224).
"""
import math
from typing import Optional, Tuple

import numpy as np
import tensorflow as tf

Grid = Tuple[int, int]


def square_grid(num_grid_tokens: int) -> Grid:
    """The (rows, columns) of a square grid of that many tokens; ValueError otherwise."""
    side = math.isqrt(num_grid_tokens)
    if side * side != num_grid_tokens:
        raise ValueError(f'{num_grid_tokens} position-embedding tokens are no square grid; '
                         'give its grid.')
    return side, side


def resample(embedding, new_grid: Grid, num_prefix_tokens: int,
             old_grid: Optional[Grid] = None):
    """embedding [1, prefix + rows * columns, depth] (a tensor) on `new_grid`, in its
    dtype; the grid is computed in float32. old_grid: the embedding's (default: square)."""
    embedding = tf.convert_to_tensor(embedding)
    num_grid_tokens = embedding.shape[1] - num_prefix_tokens
    old_grid = tuple(old_grid or square_grid(num_grid_tokens))
    if tuple(new_grid) == old_grid:
        return embedding
    prefix, grid = embedding[:, :num_prefix_tokens], embedding[:, num_prefix_tokens:]
    depth = embedding.shape[-1]
    image = tf.reshape(tf.cast(grid, tf.float32), [1, *old_grid, depth])
    resized = tf.image.resize(image, list(new_grid), method='bicubic', antialias=True)
    resized = tf.cast(tf.reshape(resized, [1, new_grid[0] * new_grid[1], depth]),
                      embedding.dtype)
    return tf.concat([prefix, resized], axis=1)


def resample_array(embedding: np.ndarray, new_grid: Grid, num_prefix_tokens: int,
                   old_grid: Optional[Grid] = None) -> np.ndarray:
    """`resample` of a stored array (a checkpoint's, a timm file's), as float32 numpy."""
    return resample(np.asarray(embedding, np.float32), new_grid, num_prefix_tokens,
                    old_grid).numpy()
