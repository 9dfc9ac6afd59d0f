"""The training loss, as slim's train_image_classifier built it, computed in float32;
with a teacher (training.recipes.distillation), Hinton et al.'s distillation term beside it."""
from typing import Dict, NamedTuple, Optional

import tensorflow as tf

AUX_LOSS_WEIGHT = 0.4  # slim's weight for Inception's auxiliary head


class MixedLabels(NamedTuple):
    """The labels of a mixed batch (training.recipes.batch_mixing): each example's target is
    `weight` of its own label and 1 - weight of its partner's."""
    labels: tf.Tensor
    partner_labels: tf.Tensor
    weight: tf.Tensor  # float32, one for the batch


class TeacherLogits(NamedTuple):
    """A teacher's logits on the batch the student sees, and how they weigh in: the loss
    is (1 - weight) * the hard loss + weight * distillation_loss(..., temperature)."""
    logits: tf.Tensor  # float32, [batch, num_classes], no gradient
    weight: float
    temperature: float


def distillation_loss(student_logits, teacher_logits, temperature: float):
    """T^2 * KL(softmax(teacher / T) || softmax(student / T)), the batch's mean, in
    float32 (Hinton et al. 2015, arXiv:1503.02531; timm's batchmean KL). The T^2 keeps
    its gradients on the hard loss's scale whatever T; no gradient reaches the teacher."""
    student = tf.cast(student_logits, tf.float32) / temperature
    teacher_log_probs = tf.nn.log_softmax(
        tf.stop_gradient(tf.cast(teacher_logits, tf.float32)) / temperature)
    kl = tf.reduce_sum(tf.exp(teacher_log_probs)
                       * (teacher_log_probs - tf.nn.log_softmax(student)), axis=-1)
    return temperature ** 2 * tf.reduce_mean(kl)


def targets(labels, num_classes, label_smoothing: float):
    """[batch, num_classes] float32 targets: one-hot labels smoothed as slim smooths
    them; MixedLabels smoothed each, then mixed (as timm's mixup_target)."""
    if isinstance(labels, MixedLabels):
        weight = tf.cast(labels.weight, tf.float32)
        return (weight * targets(labels.labels, num_classes, label_smoothing)
                + (1.0 - weight) * targets(labels.partner_labels, num_classes,
                                           label_smoothing))
    one_hot = tf.one_hot(labels, num_classes, dtype=tf.float32)
    if label_smoothing:
        one_hot = one_hot * (1.0 - label_smoothing) + label_smoothing / tf.cast(
            num_classes, tf.float32)
    return one_hot


def softmax_cross_entropy(logits, labels, label_smoothing: float):
    """Mean softmax cross-entropy against `targets(labels, ...)`.

    Logits of any dtype are cast to float32 first (bfloat16 loses the small
    differences the loss is made of).
    """
    logits = tf.cast(logits, tf.float32)
    soft_targets = targets(labels, tf.shape(logits)[-1], label_smoothing)
    return tf.reduce_mean(
        tf.nn.softmax_cross_entropy_with_logits(labels=soft_targets, logits=logits))


def compute_losses(logits, end_points, labels, network, label_smoothing,
                   teacher: Optional[TeacherLogits] = None) -> Dict:
    """{'cross_entropy', 'aux_cross_entropy' (nets with an aux head), 'distillation' (with
    a teacher), 'regularization'}, whose sum is the loss; labels: integer labels or
    MixedLabels. With a teacher the label terms are weighted by 1 - teacher.weight."""
    hard_weight = 1.0 - teacher.weight if teacher is not None else 1.0
    losses = {'cross_entropy': hard_weight * softmax_cross_entropy(logits, labels,
                                                                   label_smoothing)}
    if 'AuxLogits' in end_points:
        losses['aux_cross_entropy'] = hard_weight * AUX_LOSS_WEIGHT * softmax_cross_entropy(
            end_points['AuxLogits'], labels, label_smoothing)
    if teacher is not None:
        losses['distillation'] = teacher.weight * distillation_loss(
            logits, teacher.logits, teacher.temperature)
    regularization = network.regularization_losses()
    if regularization:
        losses['regularization'] = tf.add_n(regularization)
    return losses
