"""Learning-rate schedules of TF-Slim's train_image_classifier.py (_configure_learning_rate).

Reproduces the later slim version that has --warmup_epochs:

    steps_per_epoch = num_samples_per_epoch / batch_size     (/ batches_per_update:
                                                               replicas aggregated)
    decay_steps = int(steps_per_epoch * num_epochs_per_decay)
    exponential: lr * decay_factor ** floor(step / decay_steps)
    polynomial:  (lr - end_lr) * (1 - min(step, decay_steps) / decay_steps) + end_lr
    fixed:       lr
    warmup:      min(lr * step / (steps_per_epoch * warmup_epochs), decayed lr)

and, beyond slim, cosine decay from lr down to end_lr (the floor), after the warmup:

    cosine:      end_lr + (lr - end_lr) * (1 + cos(pi * min(step - warmup, decay) / decay)) / 2
                 decay = max_number_of_steps - warmup_steps when the run's length is
                 known (the rate reaches the floor at the last step), otherwise
                 steps_per_epoch * num_epochs_per_decay (then it stays at the floor).

batch_size is slim's per-clone --batch_size, so with several replicas each one counts
epochs on its own, as slim's clones did.

With learning_rate_base_batch_size (timm's --lr-base-size), learning_rate is the rate for
that global batch and the run's global batch (every replica's batch, accumulated
micro-batches and sync replicas' aggregated ones) scales it, as timm's --lr-base:

    lr = learning_rate * (global_batch / base_batch)         linear
    lr = learning_rate * sqrt(global_batch / base_batch)     sqrt, the default for the
                                                             adaptive optimizers
"""
import dataclasses
import math
from typing import Optional, Tuple

import tensorflow as tf

from core import checks
from core.errors import UsageError

DECAY_TYPES = ('fixed', 'exponential', 'polynomial', 'cosine')
BASE_SCALES = ('', 'linear', 'sqrt')


@dataclasses.dataclass(frozen=True)
class LearningRateConfig:
    """The learning-rate flags of TF-Slim's train_image_classifier.py."""
    learning_rate_decay_type: str = 'exponential'
    learning_rate: float = 0.01
    end_learning_rate: float = 0.0001
    learning_rate_decay_factor: float = 0.94
    num_epochs_per_decay: float = 2.0
    warmup_epochs: float = 0.0
    # timm's --lr-base-size and --lr-base-scale; 0: learning_rate is the run's rate.
    learning_rate_base_batch_size: int = 0
    learning_rate_base_scale: str = ''  # linear or sqrt; '': sqrt for adaptive optimizers

    def __post_init__(self):
        checks.check_at_least(0, learning_rate_base_batch_size=(
            self.learning_rate_base_batch_size))
        if self.learning_rate_base_scale not in BASE_SCALES:
            raise UsageError(f'--learning_rate_base_scale={self.learning_rate_base_scale} '
                             'is unknown; pass linear, sqrt, or nothing (sqrt for the '
                             'adaptive optimizers, linear for the others).')
        # (--warmup_epochs is checked where the schedule is made.)
        checks.check_at_least(0, learning_rate=self.learning_rate,
                              end_learning_rate=self.end_learning_rate)
        if self.learning_rate_decay_factor <= 0:
            raise UsageError(f'--learning_rate_decay_factor={self.learning_rate_decay_factor:g}'
                             ' is out of range; pass a positive factor, e.g. 0.94.')
        if self.num_epochs_per_decay <= 0:
            raise UsageError(f'--num_epochs_per_decay={self.num_epochs_per_decay:g} is out '
                             'of range; pass a positive number of epochs, e.g. 2.')


@dataclasses.dataclass(frozen=True)
class LearningRateSchedule:
    """Maps the global step to a float32 learning rate; works inside tf.function."""
    config: LearningRateConfig
    steps_per_epoch: float
    decay_steps: int
    warmup_steps: float = 0.0  # steps_per_epoch * warmup_epochs
    # How config.learning_rate came from --learning_rate, for the plan block ('' as given).
    scaling: str = ''

    def __call__(self, global_step) -> tf.Tensor:
        config = self.config
        # TF1's decay functions compute in the learning rate's dtype, float32.
        step = tf.cast(global_step, tf.float32)
        learning_rate = tf.constant(config.learning_rate, tf.float32)
        decay_type = config.learning_rate_decay_type
        if decay_type == 'exponential':
            exponent = tf.floor(step / float(self.decay_steps))
            learning_rate = learning_rate * tf.pow(
                tf.constant(config.learning_rate_decay_factor, tf.float32), exponent)
        elif decay_type == 'polynomial':
            decay_steps = tf.constant(float(self.decay_steps), tf.float32)
            fraction = tf.minimum(step, decay_steps) / decay_steps
            end = tf.constant(config.end_learning_rate, tf.float32)
            learning_rate = (learning_rate - end) * (1.0 - fraction) + end
        elif decay_type == 'cosine':
            decay_steps = tf.constant(float(self.decay_steps), tf.float32)
            # Starts after the warmup, so the ramp ends at the full rate.
            decayed = tf.clip_by_value(step - self.warmup_steps, 0.0, decay_steps)
            end = tf.constant(config.end_learning_rate, tf.float32)
            cosine = 0.5 * (1.0 + tf.cos(math.pi * decayed / decay_steps))
            learning_rate = end + (learning_rate - end) * cosine
        if config.warmup_epochs:
            warmup_learning_rate = config.learning_rate * step / self.warmup_steps
            learning_rate = tf.minimum(warmup_learning_rate, learning_rate)
        return learning_rate


def scale_to_batch(config: LearningRateConfig, global_batch_size: int,
                   adaptive: bool) -> Tuple[LearningRateConfig, str]:
    """(config with learning_rate scaled to global_batch_size, how), as timm's --lr-base;
    config itself and '' without --learning_rate_base_batch_size."""
    base = config.learning_rate_base_batch_size
    if not base:
        return config, ''
    scale = config.learning_rate_base_scale or ('sqrt' if adaptive else 'linear')
    ratio = global_batch_size / base
    factor = math.sqrt(ratio) if scale == 'sqrt' else ratio
    how = (f'--learning_rate={config.learning_rate:g} for a global batch of {base}, x '
           f'{factor:g} ({scale}) for this run\'s {global_batch_size}')
    return dataclasses.replace(config, learning_rate=config.learning_rate * factor), how


def create_learning_rate_fn(
        config: LearningRateConfig, num_samples_per_epoch: int, batch_size: int,
        batches_per_update: int = 1,
        max_number_of_steps: Optional[int] = None, *, global_batch_size: int = None,
        adaptive: bool = False) -> LearningRateSchedule:
    """Slim's learning-rate schedule (or cosine) as a function of the global step.

    batches_per_update is the number of replicas' batches one update averages under
    slim's --sync_replicas (1 otherwise): an epoch then takes that many times fewer steps.
    max_number_of_steps, the run's length (None: unbounded), sets cosine's decay period.
    global_batch_size (default batch_size * batches_per_update), the examples of one
    update, and adaptive (the optimizer's kind) scale the rate to
    --learning_rate_base_batch_size's.
    """
    config, scaling = scale_to_batch(
        config, global_batch_size or batch_size * batches_per_update, adaptive)
    if config.learning_rate_decay_type not in DECAY_TYPES:
        raise UsageError(
            f"Unknown learning_rate_decay_type '{config.learning_rate_decay_type}'; "
            f"set --learning_rate_decay_type to one of: {', '.join(DECAY_TYPES)}.")
    if batch_size <= 0:
        raise UsageError(f'batch_size is {batch_size}; set --batch_size to a positive number.')
    if num_samples_per_epoch <= 0:
        raise UsageError(
            f'The dataset split has {num_samples_per_epoch} samples; '
            'choose a split with samples in it.')
    if batches_per_update <= 0:
        raise UsageError(
            f'batches_per_update is {batches_per_update}; '
            'set --replicas_to_aggregate to a positive number.')
    if config.warmup_epochs < 0:
        raise UsageError(
            f'warmup_epochs is {config.warmup_epochs}; set --warmup_epochs to zero or more.')

    if config.learning_rate_decay_type == 'cosine' and (
            config.end_learning_rate > config.learning_rate or config.end_learning_rate < 0):
        start = (f'the rate {config.learning_rate:g} ({scaling})' if scaling
                 else f'--learning_rate={config.learning_rate:g}')
        raise UsageError(
            f'--end_learning_rate={config.end_learning_rate:g} is the floor of the cosine '
            f'decay from {start}; set it between 0 and that rate.')

    steps_per_epoch = num_samples_per_epoch / batch_size / batches_per_update
    warmup_steps = steps_per_epoch * config.warmup_epochs
    decay_steps = int(steps_per_epoch * config.num_epochs_per_decay)
    if config.learning_rate_decay_type == 'cosine' and max_number_of_steps is not None:
        decay_steps = int(max_number_of_steps - warmup_steps)
        if decay_steps <= 0:
            raise UsageError(
                f'The warmup ({warmup_steps:g} steps of --warmup_epochs='
                f'{config.warmup_epochs:g}) leaves none of --max_number_of_steps='
                f'{max_number_of_steps} for the cosine decay; lower --warmup_epochs or '
                'raise --max_number_of_steps.')
    if decay_steps <= 0 and config.learning_rate_decay_type != 'fixed':
        raise UsageError(
            f'The learning rate would decay every {decay_steps} steps '
            f'({num_samples_per_epoch} samples per epoch, batch size {batch_size}, '
            f'{config.num_epochs_per_decay} epochs per decay); raise --num_epochs_per_decay '
            'or lower --batch_size so that a decay period spans at least one step.')
    return LearningRateSchedule(config=config, steps_per_epoch=steps_per_epoch,
                                decay_steps=decay_steps, warmup_steps=warmup_steps,
                                scaling=scaling)
