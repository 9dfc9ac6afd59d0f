"""One training loop for every strategy: an inner `tf.function` running steps under
`strategy.run`, and an outer Python loop for logging, summaries and checkpoints.

A step is split in three: compute gradients (here) -> aggregate them
(deployment.aggregation: all-reduce, or nothing for async parameter servers) -> apply
(training.optimizers, no cross-replica communication). Where the step runs is the
runner's business (deployment.runners: in this process, or scheduled on
parameter-server workers); the loop only calls `runner.run` and `runner.fetch`.
"""
import contextlib
import dataclasses
import math
import signal
import threading
import time
from typing import Callable, Dict, Optional, Sequence

import tensorflow as tf
from absl import logging

from core import checks, paths
from core.errors import SaveFailed, TrainingDiverged, UsageError
from deployment import aggregation, runners, sync_replicas
from deployment import tracing as tracing_lib
from nets import layers
from nets import precision as precision_lib
from training import checkpoints, loss_scaling, losses, moving_averages

# A stop request (SIGTERM, Ctrl-C) waits for the running call of the compiled loop; its
# length is capped so the wait stays short whatever --log_every_n_steps is.
MAX_SECONDS_PER_CALL = 2.0


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
    # Steps per call of the compiled loop, at most: calls also end at log lines, at the
    # last step, and after about MAX_SECONDS_PER_CALL.
    steps_per_loop: int = 100
    precision: str = 'float32'
    jit_compile: bool = False
    # On one device the input position (and the shuffle buffer's records) joins the
    # checkpoint, for an exact resume.
    checkpoint_input_position: bool = True
    # A profiler trace of one step every this many steps (TF1's FULL_TRACE); None: off.
    trace_every_n_steps: Optional[int] = None

    def __post_init__(self):
        if self.batch_size < 1:
            raise UsageError(f'--batch_size must be at least 1, got {self.batch_size}.')
        if self.log_every_n_steps < 1:
            raise UsageError('--log_every_n_steps must be at least 1.')
        if self.max_number_of_steps is not None and self.max_number_of_steps < 1:
            raise UsageError('--max_number_of_steps must be at least 1 when set.')
        if not 0.0 <= self.label_smoothing < 1.0:
            raise UsageError('--label_smoothing must be in [0, 1).')
        checks.check_at_least(1, unset='off', trace_every_n_steps=self.trace_every_n_steps)
        if self.steps_per_loop < 1:
            raise UsageError(f'--steps_per_loop={self.steps_per_loop} is out of range; pass '
                             'at least 1.')
        if self.precision not in precision_lib.PRECISIONS:
            raise UsageError(f'--precision={self.precision} is not one of '
                             f'{", ".join(precision_lib.PRECISIONS)}.')
        if self.moving_average_decay is not None and not 0 < self.moving_average_decay < 1:
            raise UsageError('--moving_average_decay must be in (0, 1), e.g. 0.9999.')
        checks.check_at_least(0, save_interval_secs=self.save_interval_secs,
                              save_summaries_secs=self.save_summaries_secs)
        checks.check_at_least(1, max_checkpoints_to_keep=self.max_checkpoints_to_keep)
        paths.check_output_dir(self.train_dir, '--train_dir')


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
    """Turns SIGTERM/SIGINT into a request to stop when the running call of the compiled
    loop returns (calls last about MAX_SECONDS_PER_CALL at most)."""

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


def _check_jit_compile(jit_compile, strategy, replicas_to_aggregate):
    """XLA compiles the step on one device only (measured: MirroredStrategy over logical
    CPUs fails inside XLA; parameter-server variables live in other processes)."""
    if not jit_compile:
        return
    if strategy.num_replicas_in_sync > 1 or replicas_to_aggregate is not None or (
            aggregation.is_parameter_server(strategy)):
        raise UsageError(f'--jit_compile works on one device only, not under '
                         f'{type(strategy).__name__} with '
                         f'{strategy.num_replicas_in_sync} replica(s); drop --jit_compile.')


class _Pace:
    """Steps per call of the compiled loop: up to steps_per_loop, ending at the next log
    line or the last step, and short enough (MAX_SECONDS_PER_CALL at the measured speed)
    that a stop request waits little. The first call, which traces, runs one step."""

    def __init__(self, steps_per_loop: int, log_every_n_steps: int,
                 max_steps: Optional[int]):
        self.steps_per_loop = steps_per_loop
        self.log_every_n_steps = log_every_n_steps
        self.max_steps = max_steps
        self.sec_per_step = None  # of the last call
        self.calls = 0

    def next_call(self, step: int) -> int:
        if self.calls == 0:
            return 1
        num_steps = min(self.steps_per_loop,
                        self.log_every_n_steps - step % self.log_every_n_steps)
        if self.max_steps is not None:
            num_steps = min(num_steps, self.max_steps - step)
        if self.sec_per_step:
            num_steps = min(num_steps, max(1, int(MAX_SECONDS_PER_CALL / self.sec_per_step)))
        return num_steps

    def record(self, num_steps: int, seconds: float):
        # The first call's time includes tracing: an overestimate, so a safe cap.
        self.sec_per_step = seconds / num_steps
        self.calls += 1


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
                 replicas_to_aggregate: Optional[int] = None,
                 trace_addresses: Sequence[str] = ()):
        self.strategy = strategy
        self.network = network
        self.optimizer = optimizer
        self.learning_rate_fn = learning_rate_fn
        self.input_fn = input_fn
        self.config = config
        self.is_chief = is_chief
        # Every task's host:port in a cluster: a trace covers them all.
        self.trace_addresses = tuple(trace_addresses)
        self.traced_steps = []  # steps whose trace was taken, for the record
        self._dropped_logged = 0  # sync replicas' stale gradients, as last logged
        self.compute_dtype = precision_lib.compute_dtype(config.precision)
        slow = precision_lib.slow_precision_reason(
            config.precision, on_gpu=bool(tf.config.list_logical_devices('GPU')))
        if slow:
            logging.warning('--precision=%s will likely train slower than float32 here: %s.',
                            config.precision, slow)
        _check_jit_compile(config.jit_compile, strategy, replicas_to_aggregate)
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
            # float16's range loses small gradients unless the loss is scaled up.
            self.loss_scale = (loss_scaling.DynamicLossScale()
                               if config.precision == 'mixed_float16' else None)
            # Dropout's randomness, checkpointed (exact resume). Its first state follows
            # TensorFlow's global seed (--seed). Not on parameter servers, where each
            # step runs on any worker.
            self.random_generator = (
                None if aggregation.is_parameter_server(strategy) else
                tf.random.Generator.from_seed(int(tf.random.uniform(
                    [], maxval=2**62, dtype=tf.int64))))
        tracked = {checkpoints.MODEL_KEY: network}
        if self.moving_averages is not None:
            tracked[checkpoints.EMA_KEY] = self.moving_averages
        if self.loss_scale is not None:
            tracked['loss_scale'] = self.loss_scale
        if self.random_generator is not None:
            tracked['random_generator'] = self.random_generator
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
        if self.sync_replicas:
            self._train_steps = tf.function(self._sync_steps_fn)
        else:
            # Traced without AutoGraph (the loop is an explicit tf.while_loop): AutoGraph
            # converting every layer made tracing ~6x slower.
            self._train_steps = tf.function(self._train_steps_fn, autograph=False)
        # XLA compiles the replica's work (the iterator cannot be compiled).
        self._replica_step_fn = (tf.function(self._replica_step, autograph=False,
                                             jit_compile=True)
                                 if config.jit_compile else self._replica_step)
        self._metric_names = None  # the step's metrics, in its output order (set when traced)
        # Kept for the Trainer's life: a later train() continues the same stream, and
        # destroying a distributed iterator can stall (see cli.guard.exit_now).
        self.runner = None

    # --- The inner loop. ---

    def _replica_gradients(self, images, labels, step):
        """Forward and backward on one replica's batch, with the weights of `step`."""
        learning_rate = self.learning_rate_fn(step)
        with tf.GradientTape() as tape:
            # Nets whose schedule follows training (NASNet's drop-path) read the step.
            with (layers.random_generator(self.random_generator) if self.random_generator
                  else contextlib.nullcontext()):
                logits, end_points = self.network(tf.cast(images, self.compute_dtype),
                                                  training=True, step=step)
            loss_terms = losses.compute_losses(logits, end_points, labels, self.network,
                                               self.config.label_smoothing)
            total_loss = tf.add_n(list(loss_terms.values()))
            # The aggregator sums over replicas in sync; scaling makes that the mean.
            scaled_loss = total_loss / self.strategy.num_replicas_in_sync
            if self.loss_scale is not None:
                scaled_loss = self.loss_scale.scale_loss(scaled_loss)
        gradients = tape.gradient(scaled_loss, self.train_variables)
        if self.loss_scale is not None:
            gradients = self.loss_scale.unscale(gradients)
        metrics = {'total_loss': total_loss, 'learning_rate': learning_rate, **loss_terms}
        return gradients, metrics, images[:self.config.num_image_summaries]

    def _replica_step(self, images, labels):
        gradients, metrics, first_images = self._replica_gradients(images, labels,
                                                                   self.global_step)
        self._apply_gradients(
            self.aggregator.aggregate(zip(gradients, self.train_variables)),
            metrics['learning_rate'])
        return metrics, first_images

    def _apply_gradients(self, grads_and_vars, learning_rate):
        """The optimizer's update; in float16, skipped when a gradient overflowed (the
        loss scale is lowered instead). Gradients are aggregated already, so every
        replica takes the same branch."""
        if self.loss_scale is None:
            self.optimizer.apply_gradients(grads_and_vars, learning_rate)
            return
        grads_and_vars = list(grads_and_vars)
        finite = self.loss_scale.update([g for g, _ in grads_and_vars])

        def apply():
            self.optimizer.apply_gradients(grads_and_vars, learning_rate)
            return tf.constant(True)

        tf.cond(finite, apply, lambda: tf.constant(False))

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
        metrics, first_images = self.strategy.run(self._replica_step_fn,
                                                  args=(images, labels))
        self._update_moving_averages()
        self.global_step.assign_add(1)
        return self._stack_outputs(metrics, first_images, skipped)

    def _stack_outputs(self, metrics, first_images, skipped):
        """(metrics [replicas, names] float32, first images, skipped [pipelines]): fixed
        shapes a tf.while_loop can carry, not reduced across replicas (done once per call)."""
        self._metric_names = list(metrics)
        per_replica = self.strategy.experimental_local_results(metrics)
        values = tf.stack([tf.stack([tf.cast(m[name], tf.float32)
                                     for name in self._metric_names])
                           for m in per_replica])
        images = tf.cast(self.strategy.experimental_local_results(first_images)[0],
                         tf.float32)
        skipped = (tf.stack(self.strategy.experimental_local_results(skipped[0]))
                   if skipped else tf.zeros([1], tf.int64))
        return values, images, skipped

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
            self._apply_gradients(
                zip(mean_gradients, self.train_variables),
                self.strategy.experimental_local_results(metrics['learning_rate'])[0])
            self._update_moving_averages()

        self.sync_replicas.offer(version, gradients, apply_mean)
        return self._reduce_metrics(metrics, first_images, skipped)

    def _sync_steps_fn(self, iterator, num_steps):
        """Steps until the round's target update (the runner sets it); num_steps unused."""
        del num_steps
        outputs = self._sync_step(iterator)
        return tf.while_loop(lambda _: self.global_step < self.sync_replicas.target,
                             lambda _: (self._sync_step(iterator),), (outputs,))[0]

    def _train_steps_fn(self, iterator, num_steps):
        """num_steps steps in one graph (the step traced once, inside the loop); returns
        the last step's metrics (averaged over replicas), first images, and the count of
        unreadable examples skipped so far."""
        def body(count, *_):
            return (count + 1, *self._step(iterator))

        initial = (tf.constant(0), tf.zeros([0, 0]), tf.zeros([0, 0, 0, 0]),
                   tf.zeros([0], tf.int64))
        invariants = (tf.TensorShape([]), tf.TensorShape([None, None]),
                      tf.TensorShape([None] * 4), tf.TensorShape([None]))
        _, values, images, skipped = tf.while_loop(
            lambda count, *_: count < num_steps, body, initial,
            shape_invariants=invariants)
        return tf.reduce_mean(values, axis=0), images, tf.reduce_max(skipped)

    def run_steps(self, num_steps: int):
        """Trains num_steps steps in one call of the compiled loop; returns the last
        step's metrics as floats and its first images (for the image summary)."""
        if self.runner is None:
            self.runner = runners.create_runner(self.strategy, self.input_fn,
                                                 sync_replicas=self.sync_replicas)
        outputs = self.runner.fetch(self.runner.run(self._train_steps, num_steps))
        if self.sync_replicas is not None:
            metrics, images = outputs
            metrics = {k: float(v) for k, v in metrics.items()}
            # Read once per call, on the chief: the step itself never reads it.
            dropped = int(self.sync_replicas.dropped.numpy())
            if dropped > self._dropped_logged:
                logging.info('Sync replicas: %d stale gradient(s) dropped so far.', dropped)
                self._dropped_logged = dropped
            metrics['sync_replicas/stale_gradients_dropped'] = float(dropped)
            return metrics, images
        values, images, skipped = outputs
        metrics = dict(zip(self._metric_names, values.tolist()))
        metrics['input/skipped_examples'] = float(skipped)
        return metrics, images

    # --- The outer loop. ---

    def _restore_or_initialize(self) -> int:
        if self.is_chief:  # before this run saves anything: a killed save's leftovers
            checkpoints.remove_stale_temporaries(self.config.train_dir)
        latest = self.manager.latest_checkpoint
        if latest:
            slots = getattr(self.optimizer, 'SLOTS', None)
            checkpoints.check_resume_fits(
                latest, self.config.train_dir, self.network,
                optimizer_slots=None if slots is None else [key for key, _ in slots],
                has_moving_averages=self.moving_averages is not None)
            try:
                self.checkpoint.restore(latest).assert_existing_objects_matched()
            except (AssertionError, ValueError, tf.errors.OpError) as error:
                detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
                raise UsageError(f'--train_dir={self.config.train_dir} holds {latest}, '
                                 f'which does not fit this run ({detail[:200]}); pass the '
                                 f'flags it was trained with, or a new --train_dir to '
                                 f'start afresh.') from None
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
        if not self.is_chief:
            return
        latest = self.manager.latest_checkpoint
        if latest and latest.endswith(f'-{step}'):  # saved at this step already
            return
        try:
            path = self.manager.save(checkpoint_number=step)
        except (tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError,
                tf.errors.UnavailableError, tf.errors.DataLossError, OSError) as error:
            # Disk full or an I/O error: the checkpoint file still names the last complete
            # save; what this one left behind goes.
            checkpoints.remove_partial_save(self.config.train_dir, step)
            detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
            kept = self.manager.latest_checkpoint
            raise SaveFailed(
                f'Could not save the checkpoint of step {step} in --train_dir='
                f'{self.config.train_dir} ({detail[:200]}); '
                + (f'{kept} stays the latest' if kept else 'no checkpoint was saved before')
                + '; free space there if the disk is full (or pass another --train_dir) '
                'and run again to resume.') from None
        logging.info('Saved checkpoint %s.', path)

    def save_now(self):
        """Saves at the step reached, e.g. before the job stops on a data error."""
        self._save(int(self.global_step.numpy()))

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
        self._attach_input()
        writer = (tf.summary.create_file_writer(config.train_dir)
                  if self.is_chief else None)
        last_save = last_summary = time.time()
        metrics, images, skipped_logged = {}, None, 0
        self._traced_period = step // (config.trace_every_n_steps or 1)
        pace = _Pace(config.steps_per_loop, config.log_every_n_steps, max_steps)
        # Steps and seconds since the last log line, the first (tracing) call excluded.
        window_steps, window_seconds = 0, 0.0
        with _StopRequest() as stop:
            while (max_steps is None or step < max_steps) and not stop.requested:
                num_steps = pace.next_call(step)
                tracing = pace.calls > 0 and self._trace_due(step)
                if tracing:
                    num_steps = 1
                elif config.trace_every_n_steps:  # the traced step starts a call
                    num_steps = min(num_steps, config.trace_every_n_steps -
                                    step % config.trace_every_n_steps)
                started = time.perf_counter()
                with (tracing_lib.trace(config.train_dir, self.trace_addresses,
                                        pace.sec_per_step) if tracing else
                      contextlib.nullcontext()):
                    metrics, images = self.run_steps(num_steps)
                elapsed = time.perf_counter() - started
                first_call = pace.calls == 0
                if not tracing:  # a traced step is slower than the others
                    pace.record(num_steps, elapsed)
                if not first_call and not tracing:
                    window_steps, window_seconds = window_steps + num_steps, (
                        window_seconds + elapsed)
                skipped = int(metrics.get('input/skipped_examples', 0))
                if skipped > skipped_logged:  # at most once per call
                    logging.warning('Skipped %d unreadable example(s) so far.', skipped)
                    skipped_logged = skipped
                previous_step, step = step, int(self.global_step.numpy())
                if not math.isfinite(metrics['total_loss']):
                    self._diverged(step, metrics['total_loss'])
                sec_per_step = window_seconds / window_steps if window_steps else None
                if (step // config.log_every_n_steps > previous_step // config.log_every_n_steps
                        or step == max_steps):
                    self._log(step, max_steps, metrics, sec_per_step, examples_per_step,
                              includes_tracing=sec_per_step is None)
                    window_steps, window_seconds = 0, 0.0
                now = time.time()
                if now - last_summary >= config.save_summaries_secs:
                    self._write_summaries(writer, step, metrics, images,
                                          1.0 / sec_per_step if sec_per_step else None)
                    last_summary = now
                if now - last_save >= config.save_interval_secs:
                    self._save(step)
                    last_save = now
        if images is not None:
            self._write_summaries(writer, step, metrics, images, None)
        if writer is not None:
            writer.close()
        self._save(step)
        return metrics

    def _trace_due(self, step: int) -> bool:
        """Whether the step starting now is traced: once per --trace_every_n_steps, by
        the chief."""
        every = self.config.trace_every_n_steps
        if not every or not self.is_chief or step // every <= self._traced_period:
            return False
        self._traced_period = step // every
        self.traced_steps.append(step)
        return True

    def _attach_input(self):
        """Creates the input; on one device its iterator joins the checkpoint, so a
        resumed run reads on from where the checkpoint was written."""
        if self.runner is not None:
            return
        self.runner = runners.create_runner(self.strategy, self.input_fn,
                                             sync_replicas=self.sync_replicas)
        iterator = self.runner.checkpointable_iterator()
        if not self.config.checkpoint_input_position:
            logging.info('The input position is not checkpointed '
                         '(--nocheckpoint_input_position): a resumed run reads a fresh '
                         'shuffle of the data.')
            return
        if iterator is None:
            logging.info('The input position is not checkpointed under %s: a resumed run '
                         'reads a fresh shuffle of the data.', type(self.strategy).__name__)
            return
        try:
            # Restores the position saved with the checkpoint restored above, if any.
            self.checkpoint.input_iterator = iterator
        except (tf.errors.OpError, ValueError) as error:
            detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
            logging.warning('The checkpoint\'s input position does not fit this input '
                            '(%s); reading a fresh shuffle of the data, and not '
                            'checkpointing the position in this run.', detail[:200])

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
