"""The training's TensorBoard summaries, written by the chief every --save_summaries_secs
and when training stops (an action of training.loop.controller).

Tags, as TF-Slim named them where it had them:
  total_loss, losses/<name>, learning_rate, global_step/sec, input/...   scalars
  images                            the first training images, as the net sees them
  <variable>                        histogram of each model variable (slim's name)
  <variable>/gradient               histogram of its gradient as applied
  <variable>/gradient_norm          scalar: that gradient's L2 norm
  activations/<end point>           histogram of each end point, training mode
  sparsity/<end point>              scalar: the fraction of its values that are zero

Weights are read here, outside the step. Gradients and activations come from the last
step of the call before the summary: the summary arms training.summaries.capture before
that call, so no other step computes them and no extra forward pass is run.
"""
import time

import numpy as np
import tensorflow as tf
from tensorboard.plugins.histogram import metadata as histogram_metadata

from core.naming import slim_name
from training.summaries.capture import SummaryCapture, histogram_buckets

_HISTOGRAM = histogram_metadata.create_summary_metadata(display_name=None,
                                                         description=None)


def display_images(images):
    """Rescales preprocessed images to [0, 1] for TensorBoard, each on its own range."""
    low = tf.reduce_min(images, axis=[1, 2, 3], keepdims=True)
    high = tf.reduce_max(images, axis=[1, 2, 3], keepdims=True)
    return (images - low) / tf.maximum(high - low, 1e-6)


def write_histogram(tag: str, buckets, step: int):
    """A histogram summary from [k, 3] (left, right, count) buckets."""
    tf.summary.write(tag, tf.constant(buckets, tf.float64), step=step, metadata=_HISTOGRAM)


class WriteSummaries:
    """Every --save_summaries_secs, and at the end: see the module docstring."""

    def __init__(self, writer, every_secs: float, num_images: int, pace, *,
                 network: tf.Module, capture: SummaryCapture,
                 strategy: tf.distribute.Strategy):
        self.writer = writer
        self.every_secs = every_secs
        self.num_images = num_images
        self.pace = pace
        self.network = network
        self.capture = capture
        self.strategy = strategy
        self.last = time.monotonic()
        self.due = False
        self.written_step = None

    def before_call(self, step: int, num_steps: int):
        """Decides whether the coming call ends with a summary; if so, its last step
        captures gradients and activations."""
        self.due = time.monotonic() - self.last >= self.every_secs
        self.capture.arm(step + num_steps - 1 if self.due else None)

    def __call__(self, previous, step, result):
        if self.due:
            # The speed of the last call, unless it was the first (it traced the step).
            measured = self.pace.calls > 1 and self.pace.sec_per_step
            self._write(previous, step, result,
                        1.0 / self.pace.sec_per_step if measured else None)
            self.last = time.monotonic()
            self.due = False
            self.capture.arm(None)

    def finish(self, step, result):
        if result is not None and step != self.written_step:
            self._write(step, step, result, None)
        self.writer.close()

    def _write(self, previous, step, result, steps_per_sec):
        self.written_step = step
        with self.writer.as_default(step=step):
            for name, value in result.metrics.items():
                tag = (name if name in ('total_loss', 'learning_rate') or '/' in name
                       else f'losses/{name}')
                tf.summary.scalar(tag, value)
            if steps_per_sec is not None:
                tf.summary.scalar('global_step/sec', steps_per_sec)
            tf.summary.image('images', display_images(result.images),
                             max_outputs=self.num_images)
            self._write_weights(step)
            self._write_captured(previous, step)
        self.writer.flush()

    def _write_weights(self, step):
        for variable in self.network.variables:
            # This process's copy: no all-reduce (multi-worker: only the chief writes).
            value = self.strategy.experimental_local_results(variable)[0]
            write_histogram(slim_name(variable), histogram_buckets(value).numpy(), step)

    def _write_captured(self, previous, step):
        """What the capture holds, if it is of this call's steps (at the end of training
        an unarmed call captured nothing)."""
        held = self.capture.captured(self.strategy)
        if held['gradients_step'] >= previous:
            for index, name in enumerate(self.capture.variable_names):
                write_histogram(f'{name}/gradient', held['gradient_histograms'][index], step)
                tf.summary.scalar(f'{name}/gradient_norm', held['gradient_norms'][index])
        if held['activations_step'] >= previous:
            for index, name in enumerate(self.capture.end_point_names):
                write_histogram(f'activations/{name}', held['activation_histograms'][index],
                                step)
                tf.summary.scalar(f'sparsity/{name}', np.float32(held['zero_fractions'][index]))
