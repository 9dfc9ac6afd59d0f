"""One training loop for every strategy: an inner `tf.function` running steps under
`strategy.run`, and an outer Python loop for logging, summaries and checkpoints.

A step is split in three: compute gradients (here) -> aggregate them
(deployment.aggregation: all-reduce, or nothing for async parameter servers) -> apply
(training.optimizers, no cross-replica communication). Where the step runs is the
runner's business (deployment.runners: in this process, or scheduled on
parameter-server workers); the loop only calls `runner.run` and `runner.fetch`.
"""
import dataclasses
import math
import signal
import threading
import time
from typing import Callable, Dict, Optional, Sequence

import tensorflow as tf
from absl import logging

from core.errors import TrainingDiverged, UsageError
from deployment import aggregation, runners, sync_replicas
from training import checkpoints, losses, moving_averages


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    train_dir: str
    batch_size: int  # per clone, as slim's --batch_size
    max_number_of_steps: Optional[int] = None
    log_every_n_steps: int = 10
    save_interval_secs: float = 600
    save_summaries_secs: float = 600
    max_checkpoints_to_keep: int = 5
    label_smoothing: float = 0.0
    checkpoint_path: Optional[str] = None
    checkpoint_exclude_scopes: Sequence[str] = ()
    trainable_scopes: Sequence[str] = ()
    ignore_missing_vars: bool = False
    moving_average_decay: Optional[float] = None
    num_image_summaries: int = 3

    def __post_init__(self):
        if self.batch_size < 1:
            raise UsageError(f'--batch_size must be at least 1, got {self.batch_size}.')
        if self.log_every_n_steps < 1:
            raise UsageError('--log_every_n_steps must be at least 1.')
        if self.max_number_of_steps is not None and self.max_number_of_steps < 1:
            raise UsageError('--max_number_of_steps must be at least 1 when set.')
        if not 0.0 <= self.label_smoothing < 1.0:
            raise UsageError('--label_smoothing must be in [0, 1).')
        if self.moving_average_decay is not None and not 0 < self.moving_average_decay < 1:
            raise UsageError('--moving_average_decay must be in (0, 1), e.g. 0.9999.')


def select_trainable(variables, trainable_scopes: Sequence[str]):
    """slim's --trainable_scopes: only variables under these prefixes train (all if none)."""
    scopes = [s.strip() for s in trainable_scopes if s.strip()]
    if not scopes:
        return list(variables)
    chosen = [v for v in variables if any(v.name.startswith(s) for s in scopes)]
    if not chosen:
        raise UsageError(f'--trainable_scopes={",".join(scopes)} matches no variable; '
                         f'use prefixes of names such as {variables[0].name[:-2]}.')
    return chosen


class _StopRequest:
    """Turns SIGTERM/SIGINT into a request to stop at the next step boundary."""

    def __init__(self):
        self.requested = False
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        del frame
        logging.warning('Signal %d received: saving a checkpoint and stopping.', signum)
        self.requested = True

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _pieces(variable):
    """The variables an optimizer updates: a partitioned variable's pieces, or itself."""
    return [variable] if isinstance(variable, tf.Variable) else list(variable.variables)


def _display_images(images):
    """Rescales preprocessed images to [0, 1] for TensorBoard, each on its own range."""
    low = tf.reduce_min(images, axis=[1, 2, 3], keepdims=True)
    high = tf.reduce_max(images, axis=[1, 2, 3], keepdims=True)
    return (images - low) / tf.maximum(high - low, 1e-6)


class Trainer:
    """Trains `network` with `optimizer` on batches from `input_fn` under `strategy`.

    network, optimizer and the variables they create must be made under
    `strategy.scope()`; the Trainer builds both there before the first step.
    """

    def __init__(self, *, strategy: tf.distribute.Strategy, network, optimizer,
                 learning_rate_fn: Callable, input_fn: Callable, image_shape,
                 config: TrainConfig, is_chief: bool = True,
                 replicas_to_aggregate: Optional[int] = None):
        self.strategy = strategy
        self.network = network
        self.optimizer = optimizer
        self.learning_rate_fn = learning_rate_fn
        self.input_fn = input_fn
        self.config = config
        self.is_chief = is_chief
        with strategy.scope():
            network.build(image_shape)
            self.train_variables = [
                piece for variable in select_trainable(network.trainable_variables,
                                                       config.trainable_scopes)
                for piece in _pieces(variable)]
            optimizer.build(self.train_variables)
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                           name='global_step')
            # Averages every network variable, batch-norm statistics included, as slim
            # averaged its model variables.
            self.moving_averages = (
                moving_averages.ExponentialMovingAverage(config.moving_average_decay,
                                                         network.variables)
                if config.moving_average_decay else None)
        tracked = {checkpoints.MODEL_KEY: network}
        if self.moving_averages is not None:
            tracked[checkpoints.EMA_KEY] = self.moving_averages
        self.checkpoint = tf.train.Checkpoint(**tracked, optimizer=optimizer,
                                              global_step=self.global_step)
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, config.train_dir, max_to_keep=config.max_checkpoints_to_keep,
            checkpoint_name='model.ckpt', step_counter=self.global_step)
        # Within one worker, clones always all-reduce; across parameter-server workers,
        # updates are asynchronous or (replicas_to_aggregate set) sync replicas.
        self.aggregator = aggregation.for_strategy(strategy)
        self.sync_replicas = None
        if replicas_to_aggregate is not None:
            with strategy.scope():
                self.sync_replicas = sync_replicas.SyncReplicas(
                    self.train_variables, self.global_step, replicas_to_aggregate)
            self.aggregator = aggregation.AllReduce()
        self._train_steps = tf.function(self._sync_steps_fn if self.sync_replicas else
                                         self._train_steps_fn)
        # Kept for the Trainer's life: a later train() continues the same stream, and
        # destroying a distributed iterator can stall (see cli.guard.exit_now).
        self.runner = None

    # --- The inner loop. ---

    def _replica_gradients(self, images, labels, step):
        """Forward and backward on one replica's batch, with the weights of `step`."""
        learning_rate = self.learning_rate_fn(step)
        with tf.GradientTape() as tape:
            # Nets whose schedule follows training (NASNet's drop-path) read the step.
            logits, end_points = self.network(images, training=True, step=step)
            loss_terms = losses.compute_losses(logits, end_points, labels, self.network,
                                               self.config.label_smoothing)
            total_loss = tf.add_n(list(loss_terms.values()))
            # The aggregator sums over replicas in sync; scaling makes that the mean.
            scaled_loss = total_loss / self.strategy.num_replicas_in_sync
        gradients = tape.gradient(scaled_loss, self.train_variables)
        metrics = {'total_loss': total_loss, 'learning_rate': learning_rate, **loss_terms}
        return gradients, metrics, images[:self.config.num_image_summaries]

    def _replica_step(self, images, labels):
        gradients, metrics, first_images = self._replica_gradients(images, labels,
                                                                   self.global_step)
        self.optimizer.apply_gradients(
            self.aggregator.aggregate(zip(gradients, self.train_variables)),
            metrics['learning_rate'])
        return metrics, first_images

    def _update_moving_averages(self):
        if self.moving_averages is not None:
            self.moving_averages.update(num_updates=self.global_step)

    def _reduce_metrics(self, metrics, first_images, skipped):
        mean = tf.distribute.ReduceOp.MEAN
        metrics = {k: self.strategy.reduce(mean, v, axis=None) for k, v in metrics.items()}
        if skipped:  # counted per input pipeline: this worker's
            metrics['input/skipped_examples'] = tf.reduce_max(
                tf.stack(self.strategy.experimental_local_results(skipped[0])))
        return metrics, self.strategy.experimental_local_results(first_images)[0]

    def _step(self, iterator):
        # An optional third item: examples the input pipeline could not decode so far.
        images, labels, *skipped = next(iterator)
        metrics, first_images = self.strategy.run(self._replica_step, args=(images, labels))
        self._update_moving_averages()
        self.global_step.assign_add(1)
        return self._reduce_metrics(metrics, first_images, skipped)

    # --- Sync replicas over parameter servers: the step offers its gradients. ---

    def _replica_contribution(self, images, labels, version):
        # Weights are read after the version they belong to (see deployment.sync_replicas).
        with tf.control_dependencies([version]):
            gradients, metrics, first_images = self._replica_gradients(images, labels,
                                                                       version)
        # This worker's clones first agree on one gradient (a no-op for one clone).
        summed = self.aggregator.aggregate(zip(gradients, self.train_variables))
        return [g for g, _ in summed], metrics, first_images

    def _sync_step(self, iterator):
        images, labels, *skipped = next(iterator)
        version = self.global_step.read_value()
        gradients, metrics, first_images = self.strategy.run(
            self._replica_contribution, args=(images, labels, version))
        gradients = self.strategy.experimental_local_results(gradients)[0]

        def apply_mean(mean_gradients):
            self.optimizer.apply_gradients(
                zip(mean_gradients, self.train_variables),
                self.strategy.experimental_local_results(metrics['learning_rate'])[0])
            self._update_moving_averages()

        self.sync_replicas.offer(version, gradients, apply_mean)
        metrics, first_images = self._reduce_metrics(metrics, first_images, skipped)
        metrics['sync_replicas/stale_gradients_dropped'] = tf.cast(
            self.sync_replicas.dropped.read_value(), tf.float32)
        return metrics, first_images

    def _sync_steps_fn(self, iterator, num_steps):
        """Steps until the round's target update (the runner sets it); num_steps unused."""
        del num_steps
        outputs = self._sync_step(iterator)
        return tf.while_loop(lambda _: self.global_step < self.sync_replicas.target,
                             lambda _: (self._sync_step(iterator),), (outputs,))[0]

    def _train_steps_fn(self, iterator, num_steps):
        outputs = self._step(iterator)
        for _ in tf.range(num_steps - 1):
            outputs = self._step(iterator)
        return outputs

    # --- The outer loop. ---

    def _restore_or_initialize(self) -> int:
        latest = self.manager.latest_checkpoint
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            logging.info('Resumed from %s at step %d.', latest, int(self.global_step.numpy()))
        elif self.config.checkpoint_path:
            checkpoints.restore_network(
                self.network, self.config.checkpoint_path,
                exclude_scopes=self.config.checkpoint_exclude_scopes,
                ignore_missing_vars=self.config.ignore_missing_vars, fine_tuning=True)
        return int(self.global_step.numpy())

    def _write_summaries(self, writer, step, metrics, images, steps_per_sec):
        if writer is None:
            return
        with writer.as_default(step=step):
            for name, value in metrics.items():
                tag = (name if name in ('total_loss', 'learning_rate') or '/' in name
                       else f'losses/{name}')
                tf.summary.scalar(tag, value)
            if steps_per_sec is not None:
                tf.summary.scalar('global_step/sec', steps_per_sec)
            tf.summary.image('images', _display_images(images),
                             max_outputs=self.config.num_image_summaries)
        writer.flush()

    def _save(self, step):
        if self.is_chief:
            path = self.manager.save(checkpoint_number=step)
            logging.info('Saved checkpoint %s.', path)

    def train(self) -> Dict[str, float]:
        """Runs until --max_number_of_steps (or forever); returns the last metrics."""
        config = self.config
        step = self._restore_or_initialize()
        max_steps = config.max_number_of_steps
        if max_steps is not None and step >= max_steps:
            logging.info('Checkpoint is at step %d >= --max_number_of_steps=%d; nothing '
                         'to train.', step, max_steps)
            return {}
        examples_per_step = config.batch_size * self.strategy.num_replicas_in_sync
        if self.runner is None:
            self.runner = runners.create_runner(self.strategy, self.input_fn,
                                                 sync_replicas=self.sync_replicas)
        writer = (tf.summary.create_file_writer(config.train_dir)
                  if self.is_chief else None)
        last_save = last_summary = time.time()
        metrics, traced, skipped_logged = {}, False, 0
        with _StopRequest() as stop:
            while max_steps is None or step < max_steps:
                num_steps = config.log_every_n_steps - step % config.log_every_n_steps
                if max_steps is not None:
                    num_steps = min(num_steps, max_steps - step)
                started = time.time()
                metrics, images = self.runner.fetch(
                    self.runner.run(self._train_steps, num_steps))
                metrics = {k: float(v) for k, v in metrics.items()}
                elapsed = time.time() - started
                skipped = int(metrics.get('input/skipped_examples', 0))
                if skipped > skipped_logged:  # at most once per log line
                    logging.warning('Skipped %d unreadable example(s) so far.', skipped)
                    skipped_logged = skipped
                step = int(self.global_step.numpy())
                if not math.isfinite(metrics['total_loss']):
                    self._diverged(step, metrics['total_loss'])
                sec_per_step = elapsed / num_steps
                self._log(step, max_steps, metrics, sec_per_step, examples_per_step,
                          includes_tracing=not traced)
                now = time.time()
                if now - last_summary >= config.save_summaries_secs:
                    self._write_summaries(writer, step, metrics, images,
                                          None if not traced else 1.0 / sec_per_step)
                    last_summary = now
                traced = True
                if now - last_save >= config.save_interval_secs:
                    self._save(step)
                    last_save = now
                if stop.requested:
                    break
        self._write_summaries(writer, step, metrics, images, None)
        if writer is not None:
            writer.close()
        self._save(step)
        return metrics

    def _diverged(self, step, loss):
        """Stops without saving the diverged weights, naming the checkpoint to go back to."""
        last_good = self.manager.latest_checkpoint
        restart = (f'the last good checkpoint is {last_good}' if last_good else
                   'no checkpoint was saved before it')
        raise TrainingDiverged(
            f'Loss became {loss} by step {step}; {restart}; lower --learning_rate (or '
            f'check the input data) and train again.')

    def _log(self, step, max_steps, metrics, sec_per_step, examples_per_step,
             includes_tracing):
        remaining = ''
        if max_steps is not None and not includes_tracing:
            eta = int((max_steps - step) * sec_per_step)
            remaining = f', ETA {eta // 3600}:{eta // 60 % 60:02d}:{eta % 60:02d}'
        timing = ('includes tracing' if includes_tracing else
                  f'{sec_per_step:.3f} sec/step, '
                  f'{examples_per_step / sec_per_step:.1f} examples/sec')
        logging.info('global step %d: loss = %.4f (%s), lr = %.6g%s', step,
                     metrics['total_loss'], timing, metrics['learning_rate'], remaining)
