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


def make_deterministic():
    """Makes a traced step compute the same bits in every process (--deterministic).

    Grappler's graph rewrites regroup the sums of gradients in an order that varies
    between traces (measured: inception_v3's gradients differed by ~1e-5 between two
    traces of one step, identical with Grappler off; turning its passes off one at a
    time did not suffice), so Grappler is turned off; op determinism makes TensorFlow
    refuse ops that have no deterministic kernel.
    """
    tf.config.optimizer.set_experimental_options({'disable_meta_optimizer': True})
    tf.config.experimental.enable_op_determinism()
