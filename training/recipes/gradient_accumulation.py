"""Gradient accumulation: one update from K micro-batches, equal to one update on their
concatenation (--gradient_accumulation_steps=K).

The input pipeline's batches are grouped by K (`stack_micro_batches`), so one element of
the input is one update's input, [K, batch, ...]. The input position a checkpoint saves
therefore always falls between updates, and a resumed run reads on exactly. Each
replica runs its K micro-batches one after the other in a tf.while_loop (`accumulate`),
summing their gradients; the plan's aggregation (one all-reduce for the K) and the
optimizer's update then run once. The model step divides each micro-batch's loss by K,
so the sum is the gradient of the mean loss over the K micro-batches: the concatenated
batch's cross-entropy, and its regularization terms once.

Batch norm normalises and updates its moving statistics per micro-batch, as it would
with a K times smaller batch. The learning-rate schedule and global_step count updates.
"""
from typing import Callable, Dict, List, Tuple

import tensorflow as tf

from core.errors import UsageError


def check_deployment(micro_batches: int, sync_replicas: bool):
    """Refuses accumulation where an update would not equal one on the concatenated
    batch."""
    if micro_batches > 1 and sync_replicas:
        raise UsageError(f'--gradient_accumulation_steps={micro_batches} does not combine '
                         'with --sync_replicas, whose updates already average '
                         '--replicas_to_aggregate batches; drop one of the two.')


def configure_graph_optimizer(micro_batches: int):
    """Turns Grappler's arithmetic optimizer off when accumulating (before the step is
    traced). Its rewrite of the step's sums into accumulators, inside the micro-batch
    loop inside the steps loop, makes temporary variables that clash across iterations
    (AlreadyExistsError: .../AddOpsRewrite_add_7/tmp_var; cifarnet at batch 128, TF
    2.21)."""
    if micro_batches > 1:
        tf.config.optimizer.set_experimental_options({'arithmetic_optimization': False})


def stack_micro_batches(input_fn: Callable, micro_batches: int) -> Callable:
    """input_fn whose elements are `micro_batches` consecutive batches stacked: images
    [K, batch, ...], labels [K, batch], and the skipped-examples count (when the input
    reports one) of the last."""
    if micro_batches == 1:
        return input_fn

    def stacked_input_fn(input_context=None):
        dataset = input_fn(input_context).batch(micro_batches, drop_remainder=True)
        return dataset.map(lambda images, labels, *skipped:
                           (images, labels, *[count[-1] for count in skipped]))

    return stacked_input_fn


def accumulate(micro_batch_gradients: Callable, images, labels, micro_batches: int,
               variables: List[tf.Variable]) -> Tuple[list, Dict, tf.Tensor]:
    """Runs `micro_batch_gradients(images, labels) -> (gradients, metrics, first_images)`
    on each of the `micro_batches` stacked ones in turn; returns the gradients summed (None
    where a variable gets none), the metrics averaged over the K, and the last
    micro-batch's first images."""
    # Filled in while the loop's body is traced (once): which variables get no gradient,
    # and the metrics' names in the order they are stacked.
    unconnected, metric_names = set(), []

    def body(index, sums, metric_values, first_images):
        gradients, metrics, first = micro_batch_gradients(images[index], labels[index])
        new_sums = []
        for position, (total, gradient) in enumerate(zip(sums, gradients)):
            if gradient is None:
                unconnected.add(position)
                new_sums.append(total)
            else:
                new_sums.append(total + tf.convert_to_tensor(gradient))
        metric_names[:] = list(metrics)
        stacked = tf.stack([tf.cast(metrics[name], tf.float32) for name in metric_names])
        return (index + 1, new_sums, metric_values.write(index, stacked),
                first_images.write(index, first))

    initial = (tf.constant(0), [tf.zeros(v.shape, v.dtype) for v in variables],
               tf.TensorArray(tf.float32, size=micro_batches),
               tf.TensorArray(images.dtype, size=micro_batches))
    # One micro-batch at a time: their activations never live together.
    _, sums, metric_values, first_images = tf.while_loop(
        lambda index, *_: index < micro_batches, body, initial, parallel_iterations=1)
    gradients = [None if position in unconnected else total
                 for position, total in enumerate(sums)]
    means = tf.reduce_mean(metric_values.stack(), axis=0)
    metrics = {name: means[k] for k, name in enumerate(metric_names)}
    return gradients, metrics, first_images.read(micro_batches - 1)
