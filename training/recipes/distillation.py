"""Knowledge distillation from a frozen teacher network (--teacher_model_name).

Hinton, Vinyals and Dean 2015, "Distilling the Knowledge in a Neural Network"
(arXiv:1503.02531), in the form of timm's LogitDistillationTask (complementary weights):

  loss = (1 - w) * hard loss + w * T^2 * KL(softmax(teacher / T) || softmax(student / T))

with w = --distillation_weight and T = --distillation_temperature. The hard loss is the
usual one (cross-entropy against the labels, label-smoothed or mixed; Inception's aux
head); weight decay is added unweighted. T^2 keeps the soft term's gradients on the
scale of the hard term's whatever T (Hinton et al., section 2). The default T = 1 is
timm's; its docstring gives 1 to 4 as typical values.

The teacher is built by nets_factory in inference mode, restored once before training
from --teacher_checkpoint_path (this toolkit's object checkpoints or TF-Slim's name-based
ones, through training.checkpoints as fine-tuning and evaluation restore), its variables
made non-trainable: no optimizer slot, no moving average, nothing in the student's
checkpoints, which evaluation and export read as before. It runs with training=False
on exactly the batch the student sees, after augmentation and mixing, micro-batch by
micro-batch under gradient accumulation, at the student's image size and preprocessing:
a teacher whose layers do not fit that size (fully connected layers sized by their
input) cannot be used at it.
"""
import contextlib
import dataclasses
from typing import Optional

import tensorflow as tf
from absl import logging

from core import checks
from core.errors import UsageError
from core.naming import slim_name
from nets import nets_factory
from training.checkpoints import restore as restore_lib
from training.recipes import losses


@dataclasses.dataclass(frozen=True)
class DistillationConfig:
    """The teacher and the soft loss's weight and temperature, by their flag names."""
    teacher_model_name: Optional[str] = None  # None: no distillation
    teacher_checkpoint_path: Optional[str] = None
    distillation_weight: float = 0.5  # w: (1 - w) * hard loss + w * soft loss
    distillation_temperature: float = 1.0  # T, timm's default

    def __post_init__(self):
        if bool(self.teacher_model_name) != bool(self.teacher_checkpoint_path):
            given, missing = (('--teacher_model_name', '--teacher_checkpoint_path')
                              if self.teacher_model_name else
                              ('--teacher_checkpoint_path', '--teacher_model_name'))
            raise UsageError(f'{given} needs {missing} too: a teacher is a network and the '
                             f'checkpoint it was trained to (an untrained one teaches '
                             f'noise); pass both, or neither to train without one.')
        if self.teacher_model_name and (self.teacher_model_name
                                        not in nets_factory.network_names()):
            raise UsageError(f'--teacher_model_name={self.teacher_model_name} is not a '
                             f'network; choose one of: '
                             f'{", ".join(nets_factory.network_names())}.')
        checks.check_fraction(distillation_weight=self.distillation_weight)
        if not self.distillation_temperature > 0:
            raise UsageError(f'--distillation_temperature={self.distillation_temperature:g} '
                             'is out of range; pass a value above 0 (1 to 4 is usual).')

    @property
    def enabled(self) -> bool:
        return bool(self.teacher_model_name)

    def describe(self) -> str:
        return (f'{self.teacher_model_name} from {self.teacher_checkpoint_path}, '
                f'weight {self.distillation_weight:g}, '
                f'temperature {self.distillation_temperature:g}')


@contextlib.contextmanager
def _frozen_variables():
    """Variables created inside are not trainable (the strategy's creator still runs)."""
    def creator(next_creator, **kwargs):
        return next_creator(**{**kwargs, 'trainable': False})

    with tf.variable_creator_scope(creator):
        yield


class Teacher:
    """A frozen network whose logits `soft_targets(images)` gives, as
    losses.TeacherLogits; build it with `build_teacher`."""

    def __init__(self, network, config: DistillationConfig):
        self.network = network
        self.config = config

    def soft_targets(self, images) -> losses.TeacherLogits:
        logits, _ = self.network(images, training=False)
        return losses.TeacherLogits(tf.stop_gradient(tf.cast(logits, tf.float32)),
                                    self.config.distillation_weight,
                                    self.config.distillation_temperature)


def build_teacher(config: DistillationConfig, *, num_classes: int, image_shape,
                  strategy: tf.distribute.Strategy) -> Optional[Teacher]:
    """The teacher of `config` (None without one), its variables created under the
    strategy's scope (mirrored on clones) and restored from its checkpoint; a checkpoint
    that does not fit is one UsageError naming the flags to change."""
    if not config.enabled:
        return None
    with strategy.scope(), _frozen_variables():
        network = nets_factory.get_network_fn(config.teacher_model_name, num_classes,
                                              is_training=False)
        network.build(image_shape)
    with strategy.scope():
        _restore(network, config, image_shape)
    logging.info('Distillation: teacher %s.', config.describe())
    return Teacher(network, config)


def _restore(network, config: DistillationConfig, image_shape):
    """Restores the teacher by slim name, as restore_lib.restore_network does for
    fine-tuning and evaluation, after checking that every variable fits."""
    path, name = config.teacher_checkpoint_path, config.teacher_model_name
    flag = f'--teacher_checkpoint_path={path}'
    try:
        plan = restore_lib.plan_restore(network, path)
    except UsageError as error:
        reason = str(error).replace('--checkpoint_path', '--teacher_checkpoint_path')
        raise UsageError(f'{flag}: {reason}') from None
    classes, channels = plan.class_counts(), plan.image_channels()
    if channels:
        raise UsageError(f'{flag} holds a teacher trained on images with {channels[0]} '
                         f'channel(s); the student is fed {channels[1]}: pass a teacher '
                         f'trained as the student is (--use_grayscale).')
    if classes:
        raise UsageError(f'{flag} holds a teacher for {classes[0]} classes; the student '
                         f'trains {classes[1]} (the dataset\'s classes minus '
                         f'--labels_offset): pass a teacher trained on this dataset.')
    if plan.mismatched or plan.missing:
        example = (f'{plan.mismatched[0][0]}: checkpoint {plan.mismatched[0][1]} vs '
                   f'teacher {plan.mismatched[0][2]}' if plan.mismatched else
                   f'{len(plan.missing)} of its {len(network.variables)} variables missing, '
                   f'e.g. {plan.missing[0]}')
        size = network.default_image_size
        raise UsageError(f'{flag} does not fit --teacher_model_name={name} at the '
                         f'student\'s image size {image_shape[0]}x{image_shape[1]} '
                         f'({example}); pass the --teacher_model_name that checkpoint was '
                         f'trained as, and a --train_image_size its layers take (its '
                         f'default: {size}).')
    restore_lib.restore_network(network, path)
    logging.vlog(1, 'Teacher variables: %s',
                 ', '.join(slim_name(v) for v in network.variables))
