"""Batch-norm moving statistics that can be trusted: how much of them is still their
initial value, and recomputing them exactly ("precise BN", Wu & Johnson, arXiv
2105.07576).

A moving mean starts at 0 and a moving variance at 1, and each training step moves them
by (1 - decay) towards the batch's moments, so after n steps decay**n of each is still
the initial value: at TF-Slim's 0.9997, 89 % after 400 steps. Evaluation, export and
prediction normalise with them, so a short training from scratch can evaluate near
chance although its training loss fell. Two ways out: a smaller --batch_norm_decay, or
recomputing the statistics of a checkpoint: every moving mean and variance becomes the
exact average of its layer's batch moments over N batches of the training split (the
training's preprocessing, weights fixed, each layer normalising with its batch's
moments as in training).
"""
import dataclasses
import math
from typing import List, Optional

import numpy as np
import tensorflow as tf

from nets import layers

# Above this weight of the initial value, the statistics are immature (95 % of the
# average is the data's after 3 / (1 - decay) steps).
IMMATURE_WEIGHT = 0.05


def initial_value_weight(decay: float, steps: int) -> float:
    """The weight the initial value still has in a moving average after `steps` steps."""
    return decay ** max(steps, 0)


def steps_to_mature(decay: float) -> int:
    """Steps after which the initial value weighs at most IMMATURE_WEIGHT."""
    return math.ceil(math.log(IMMATURE_WEIGHT) / math.log(decay)) if 0 < decay < 1 else 0


def immature_warning(batch_norm: Optional[layers.BatchNormParams],
                     steps: Optional[int]) -> Optional[str]:
    """One line naming the fix when a net with `batch_norm` trained `steps` steps has
    immature moving statistics; None when they are mature (or there are none)."""
    if batch_norm is None or steps is None:
        return None
    weight = initial_value_weight(batch_norm.decay, steps)
    if weight <= IMMATURE_WEIGHT:
        return None
    return (f'Batch-norm moving statistics are immature: after {steps} steps at decay '
            f'{batch_norm.decay:g}, {weight:.0%} of each moving mean and variance is still '
            f'its initial value, so evaluation, export and predictions may be near chance. '
            f'Evaluate or export with --recompute_batch_norm_statistics=50, or train with '
            f'a smaller --batch_norm_decay (the initial value weighs {IMMATURE_WEIGHT:.0%} '
            f'after {steps_to_mature(batch_norm.decay)} steps at {batch_norm.decay:g}, '
            f'{steps_to_mature(0.99)} at 0.99).')


def batch_norms(network: tf.Module) -> List[layers.BatchNorm]:
    return [module for module in network.submodules if isinstance(module, layers.BatchNorm)]


def check_recomputable(network: tf.Module):
    """The network's batch norms must replace their statistics with each batch's
    moments (decay 0): build it with batch_norm_decay=0."""
    decays = {bn.params.decay for bn in batch_norms(network)}
    if decays != {0.0}:
        raise ValueError(f'Recomputing needs a network built with batch_norm_decay=0 '
                         f'(its batch norms have decays {sorted(decays)}).')


@dataclasses.dataclass
class Recomputed:
    num_batches: int  # per replica
    num_layers: int


def recompute(network: tf.Module, dataset: tf.data.Dataset, num_batches: int,
              strategy: tf.distribute.Strategy) -> Recomputed:
    """Sets every moving mean and variance of `network` (built with batch_norm_decay=0,
    its weights restored) to the average of its layer's batch moments over num_batches
    batches of `dataset` (elements: images first) on each replica.

    The moments are those the training's update takes: the batch mean, and the batch
    variance as the layer's moving variance averages it (Bessel-corrected by the fused
    kernel). Fewer batches are used if the dataset ends first.
    """
    check_recomputable(network)
    norms = [bn for bn in batch_norms(network) if bn.moving_mean is not None]
    statistics = [v for bn in norms for v in (bn.moving_mean, bn.moving_variance)]
    # Other state a training call moves (quantization ranges) is put back afterwards.
    recomputed = {id(v) for v in statistics}
    kept = [(v, tf.identity(v)) for v in network.non_trainable_variables
            if id(v) not in recomputed]

    def replica_step(images):
        network(images, training=True)  # with decay 0, each statistic := the batch's

    @tf.function(autograph=False)
    def step(batch):
        strategy.run(replica_step, args=(batch[0],))

    sums = [np.zeros(v.shape, np.float64) for v in statistics]
    seen = 0
    for batch in strategy.experimental_distribute_dataset(dataset):
        if seen == num_batches:
            break
        step(batch)
        for total, variable in zip(sums, statistics):
            for value in strategy.experimental_local_results(variable):
                total += value.numpy()
        seen += 1
    if seen == 0:
        raise ValueError('No batch to recompute the batch-norm statistics from.')
    for variable, value in kept:
        variable.assign(value)
    replicas = strategy.num_replicas_in_sync
    for total, variable in zip(sums, statistics):
        average = (total / (seen * replicas)).astype(np.float32)
        for component in strategy.experimental_local_results(variable):
            component.assign(average)
    return Recomputed(num_batches=seen, num_layers=len(norms))
