"""The model's side of a training step: one replica's gradients, and the update.

The deployment plan's inner loop (deployment.plan chooses it per mode)
calls `replica_gradients` inside `strategy.run`, aggregates the gradients its own way,
then `apply_gradients` and `after_update`. Everything here is the same in every mode,
mixup/cutmix (training.recipes.batch_mixing), gradient accumulation
(training.recipes.gradient_accumulation) and a distillation teacher (training.recipes.distillation)
included.
"""
from typing import Callable, Sequence

import tensorflow as tf
from absl import logging

from core.errors import UsageError
from nets import layer_depths
from nets import precision as precision_lib
from deployment import weight_factors
from nets.layers import stateless
from training.recipes import batch_mixing
from training.checkpoints import restore
from training.recipes import distillation
from training.recipes import gradient_accumulation
from training.recipes import loss_scaling
from training.recipes import losses
from training.recipes import moving_averages
from training.summaries import capture
from training.loop.train_config import TrainConfig


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


def layer_decay_scales(network, layer_decay: float) -> dict:
    """--layer_decay's learning-rate scale of each trainable variable, by name, from the
    depths its family says (nets.layer_depths)."""
    depths = layer_depths.layer_depths(network)
    if depths is None:
        raise UsageError(f'--layer_decay={layer_decay:g} needs the depths of the '
                         f'network\'s variables, which {network.name} does not say '
                         f'(nets/layer_depths.py knows {", ".join(layer_depths.FAMILY_NAMES)});'
                         ' drop --layer_decay.')
    return depths.scales(layer_decay)


def _pieces(variable):
    """The variables an optimizer updates: a partitioned variable's pieces, or itself."""
    return [variable] if isinstance(variable, tf.Variable) else list(variable.variables)


class ModelStep:
    """The network, its optimizer and what the update keeps (global step, moving
    averages, loss scale, dropout's generator); created under `strategy.scope()`. With
    config.distillation, the frozen teacher too, restored here (none of it is
    checkpointed)."""

    def __init__(self, *, strategy: tf.distribute.Strategy, network, optimizer,
                 learning_rate_fn: Callable, image_shape, config: TrainConfig,
                 with_random_generator: bool):
        self.strategy = strategy
        self.network = network
        self.optimizer = optimizer
        self.learning_rate_fn = learning_rate_fn
        self.label_smoothing = config.label_smoothing
        self.num_image_summaries = config.num_image_summaries
        self.mixing = config.mixing
        self.micro_batches = config.gradient_accumulation_steps
        self.batch_size = config.batch_size  # per replica
        self.compute_dtype = precision_lib.compute_dtype(config.precision)
        # Matmul weights' gradients can come as factors for the all-reduce, unless a
        # loss scale or micro-batches unscale or sum gradients before aggregation.
        self.can_factor_weight_gradients = (self.micro_batches == 1
                                            and config.precision != 'mixed_float16')
        slow = precision_lib.slow_precision_reason(
            config.precision, on_gpu=bool(tf.config.list_logical_devices('GPU')))
        if slow:
            logging.warning('--precision=%s will likely train slower than float32 here: %s.',
                            config.precision, slow)
        with strategy.scope():
            network.build(image_shape)
            self.train_variables = [
                piece for variable in select_trainable(network.trainable_variables,
                                                       config.trainable_scopes)
                for piece in _pieces(variable)]
            if optimizer.layer_decay:
                optimizer.learning_rate_scales = layer_decay_scales(network,
                                                                    optimizer.layer_decay)
            optimizer.build(self.train_variables)
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                           name='global_step')
            # Gradients and activations for TensorBoard, kept on summary steps only.
            self.summary_capture = capture.SummaryCapture(self.global_step,
                                                                  self.train_variables)
            self.replica_statistics = [
                v for v in network.variables
                if v.synchronization == tf.VariableSynchronization.ON_READ]
            # Averages every network variable, batch-norm statistics included, as slim
            # averaged its model variables.
            self.moving_averages = (
                moving_averages.ExponentialMovingAverage(config.moving_average_decay,
                                                         network.variables)
                if config.moving_average_decay else None)
            # float16's range loses small gradients unless the loss is scaled up.
            self.loss_scale = (loss_scaling.DynamicLossScale()
                               if config.precision == 'mixed_float16' else None)
            # Dropout's and mixing's randomness, checkpointed (exact resume). Its first
            # state follows TensorFlow's global seed (--seed).
            self.random_generator = (
                tf.random.Generator.from_seed(int(tf.random.uniform(
                    [], maxval=2**62, dtype=tf.int64))) if with_random_generator else None)
        self.teacher = distillation.build_teacher(
            config.distillation, num_classes=network.num_classes, image_shape=image_shape,
            strategy=strategy)

    def checkpointed(self) -> dict:
        """The objects of this step a checkpoint holds, by their checkpoint keys."""
        tracked = {'optimizer': self.optimizer, 'global_step': self.global_step}
        if self.moving_averages is not None:
            tracked[restore.EMA_KEY] = self.moving_averages
        if self.loss_scale is not None:
            tracked['loss_scale'] = self.loss_scale
        if self.random_generator is not None:
            tracked['random_generator'] = self.random_generator
        return tracked

    def replica_gradients(self, images, labels, step, *, capture: bool = False,
                          factor_weights: bool = False):
        """Forward and backward on one replica's batch, with the weights of `step`;
        returns (gradients, metrics, the batch's first images). With gradient
        accumulation the batch is K micro-batches stacked ([K, batch, ...]).

        capture: the step holds TensorBoard's activation capture (taken on the armed
        step only, training.summaries.capture). factor_weights: a matmul weight's
        gradient may come as its factors (deployment.weight_factors.Factored), which
        the all-reduce multiplies; ignored where can_factor_weight_gradients is False
        or one replica is in sync."""
        learning_rate = self.learning_rate_fn(step)
        factor_weights = (factor_weights and self.can_factor_weight_gradients
                          and self.strategy.num_replicas_in_sync > 1)
        if self.micro_batches == 1:
            gradients, metrics, first_images = self._gradients(images, labels, step,
                                                               capture, factor_weights)
        else:
            gradients, metrics, first_images = gradient_accumulation.accumulate(
                lambda micro_images, micro_labels: self._gradients(
                    micro_images, micro_labels, step, capture, factor_weights=False),
                images, labels, self.micro_batches, self.train_variables)
        metrics = {'total_loss': metrics.pop('total_loss'), 'learning_rate': learning_rate,
                   **metrics}
        return gradients, metrics, first_images

    def _gradients(self, images, labels, step, capture, factor_weights):
        """(gradients, loss metrics, first images) of one (micro-)batch, mixed first
        when mixup or cutmix is on; a teacher sees the batch as mixed."""
        if self.mixing.enabled:
            images, labels = batch_mixing.mix_batch(
                images, labels, stateless.random_seed(self.random_generator), self.mixing)
        teacher = (self.teacher.soft_targets(tf.cast(images, self.compute_dtype))
                   if self.teacher is not None else None)
        with tf.GradientTape() as tape:
            recording = (weight_factors.Recording(
                self.train_variables, self.strategy.num_replicas_in_sync, self.batch_size,
                tape) if factor_weights else None)
            # Nets whose schedule follows training (NASNet's drop-path) read the step; a
            # recording is passed only when there is one (any net runs without).
            recorded = {'product_recording': recording} if recording is not None else {}
            logits, end_points = self.network(
                tf.cast(images, self.compute_dtype), training=True, step=step,
                random_generator=self.random_generator, **recorded)
            loss_terms = losses.compute_losses(logits, end_points, labels, self.network,
                                               self.label_smoothing, teacher)
            total_loss = tf.add_n(list(loss_terms.values()))
            # The aggregation sums over replicas in sync and accumulation over
            # micro-batches; scaling makes that the mean.
            scaled_loss = total_loss / (self.strategy.num_replicas_in_sync
                                        * self.micro_batches)
            if self.loss_scale is not None:
                scaled_loss = self.loss_scale.scale_loss(scaled_loss)
        # With a recording, factored weights' gradients come as their factors.
        gradients = (recording or tape).gradient(scaled_loss, self.train_variables)
        if self.loss_scale is not None:
            gradients = self.loss_scale.unscale(gradients)
        if capture:
            self.summary_capture.capture_activations(end_points)
        return gradients, {'total_loss': total_loss, **loss_terms}, \
            images[:self.num_image_summaries]

    def apply_gradients(self, grads_and_vars, learning_rate, *, capture: bool = False):
        """The optimizer's update; in float16, skipped when a gradient overflowed (the
        loss scale is lowered instead). Gradients are aggregated already, so every
        replica takes the same branch. capture: as for replica_gradients (the gradients'
        histograms and norms)."""
        grads_and_vars = list(grads_and_vars)
        if capture:
            self.summary_capture.capture_gradients(grads_and_vars)
        if self.loss_scale is None:
            self.optimizer.apply_gradients(grads_and_vars, learning_rate)
            return
        finite = self.loss_scale.update([g for g, _ in grads_and_vars])

        def apply():
            self.optimizer.apply_gradients(grads_and_vars, learning_rate)
            return tf.constant(True)

        tf.cond(finite, apply, lambda: tf.constant(False))

    def share_replica_statistics(self):
        """Sets each replica's moving statistics (batch norm's, ON_READ: one copy per
        replica, checkpoints hold the first's) to their mean over replicas, in replica
        context after each update. Their expected values are unchanged; the copies stay
        equal, so the checkpoint holds their mean, a save reads no other replica (nor
        worker), a restored checkpoint gives every replica exactly what it had and a
        resumed run on clones continues bit for bit (one packed all-reduce per step)."""
        context = tf.distribute.get_replica_context()
        if not self.replica_statistics or context.num_replicas_in_sync == 1:
            return
        means = context.all_reduce(tf.distribute.ReduceOp.MEAN,
                                   [v.read_value() for v in self.replica_statistics])
        for variable, mean in zip(self.replica_statistics, means):
            variable.assign(mean)

    def after_update(self):
        if self.moving_averages is not None:
            self.moving_averages.update(num_updates=self.global_step)
