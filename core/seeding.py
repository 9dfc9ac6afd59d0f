"""One seed for every source of randomness a run has."""
import random

import numpy as np
import tensorflow as tf


def seed_everything(seed: int):
    """Seeds Python's `random`, numpy's global generator and TensorFlow's global seed.

    TensorFlow ops without their own seed (initialisers, dropout, augmentation) then
    draw the same numbers in the same order on every run.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    tf.random.set_seed(seed)
