"""Flag groups of the training recipes beyond TF-Slim's (issue 23): Augmentation, Batch
recipes, Stochastic depth, Distillation."""
from absl import flags

from cli.train_job import TrainingJob
from preprocessing import augment_policies
from preprocessing.augment_policies import AugmentationConfig
from training.loop.train_config import TrainConfig
from training.recipes.batch_mixing import MixingConfig
from training.recipes.distillation import DistillationConfig

# The flags belong to the script calling cli.flags.define(): absl files them under it, so
# its --helpfull and its flags.txt (cli.run_record) list them.
flags.disclaim_key_flags()


def augmentation(define):
    """Augmentation policies and random erasing: what is done to each training image."""
    define.enum('augmentation', AugmentationConfig.augmentation,
                list(augment_policies.POLICY_NAMES), 'Augmentation policy of training '
                'images, after the crop and flip and before the preprocessing family\'s '
                'colour jitter and normalisation: randaugment (RandAugment, '
                '--randaugment_layers ops at --randaugment_magnitude), autoaugment '
                '(AutoAugment\'s ImageNet policy) or none (TF-Slim\'s preprocessing '
                'alone). Evaluation and export never augment.')
    define.integer('randaugment_layers', AugmentationConfig.randaugment_layers,
                   'RandAugment\'s N: ops applied one after the other, each drawn from its '
                   '16 (or none).')
    define.float('randaugment_magnitude', AugmentationConfig.randaugment_magnitude,
                 'RandAugment\'s M, the strength of every op, from 0 to 10 (Model '
                 'Garden\'s scale and default).')
    define.float('random_erase_prob', AugmentationConfig.random_erase_prob, 'Random '
                 'erasing (timm\'s): the chance that a rectangle of 2% to 1/3 of a '
                 'training image is replaced by normal noise, after normalisation. 0: off.')


def batch_recipes(define):
    """Mixup, cutmix and gradient accumulation: what is done to a training batch."""
    define.float('mixup_alpha', MixingConfig.mixup_alpha, 'Mixup: each batch is mixed with '
                 'itself reversed, by a weight drawn from Beta(alpha, alpha) (e.g. 0.2); '
                 'its targets mix alike. 0: off.')
    define.float('cutmix_alpha', MixingConfig.cutmix_alpha, 'Cutmix: a box of each image, '
                 'of area 1 - weight with the weight drawn from Beta(alpha, alpha) (e.g. '
                 '1.0), is pasted from its partner in the reversed batch; targets mix by '
                 'the box\'s exact area. 0: off.')
    define.float('mix_prob', MixingConfig.mix_prob, 'The chance that a batch is mixed '
                 '(mixup or cutmix) at all.')
    define.float('mix_switch_prob', MixingConfig.mix_switch_prob, 'With both --mixup_alpha '
                 'and --cutmix_alpha: the chance that a batch takes cutmix rather than '
                 'mixup.')
    define.integer('gradient_accumulation_steps', TrainConfig.gradient_accumulation_steps,
                   'Micro-batches of --batch_size per update: gradients are summed over '
                   'this many batches, then applied once, as one update on their '
                   'concatenation (batch norm still sees each micro-batch). Steps, the '
                   'learning-rate schedule and --max_number_of_steps count updates.')


def stochastic_depth(define):
    """Stochastic depth (drop-path) of the residual families."""
    define.float('drop_path_rate', TrainingJob.drop_path_rate, 'Stochastic depth for the '
                 'residual families: each residual block\'s branch is dropped per example '
                 'with a probability rising linearly over depth to this rate (as timm), '
                 'identity at evaluation. 0: off; a net without residual blocks refuses '
                 'any other value.')


def distillation(define):
    """Knowledge distillation from a trained teacher (training.recipes.distillation)."""
    define.string('teacher_model_name', None, 'Distil from this trained network (a '
                  '--model_name), with --teacher_checkpoint_path: the loss becomes (1 - '
                  '--distillation_weight) * the labels\' loss + --distillation_weight * '
                  'T^2 * KL(softmax(teacher / T) || softmax(student / T)), T = '
                  '--distillation_temperature (Hinton et al. 2015). The teacher runs '
                  'frozen, in inference mode, on the very batch the student sees '
                  '(augmented, mixed) at the student\'s --train_image_size and '
                  'preprocessing, which it must take; it is not saved in the student\'s '
                  'checkpoints. Unset: no teacher.')
    define.string('teacher_checkpoint_path', None, 'The teacher\'s checkpoint: a prefix, '
                  'or a directory whose latest checkpoint is taken; a TF-Slim or toolkit '
                  'checkpoint for the dataset\'s classes (after --labels_offset).')
    define.float('distillation_weight', DistillationConfig.distillation_weight, 'w: the '
                 'teacher\'s share of the loss, in [0, 1]; the labels\' loss takes 1 - w.')
    define.float('distillation_temperature', DistillationConfig.distillation_temperature,
                 'T: both softmaxes of the distillation loss divide the logits by it; '
                 'above 1 the teacher\'s smaller probabilities count more (1 to 4 is '
                 'usual; 1 is timm\'s default).')
