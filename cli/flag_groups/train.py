"""Flag groups of a training run: Training, Optimizer, Learning rate, Fine-tuning,
Checkpoints and progress."""
from absl import flags

from cli.train_job import TrainingJob
from training.loop.train_config import TrainConfig
from training.recipes import optimizers
from training.recipes.learning_rate import LearningRateConfig
from training.recipes.optimizers import OptimizerConfig

# The flags belong to the script calling cli.flags.define(): absl files them under it, so
# its --helpfull and its flags.txt (cli.run_record) list them.
flags.disclaim_key_flags()


def training(define):
    define.string('train_dir', '/tmp/tfmodel/', 'Where checkpoints and event logs are '
                  'written.')
    define.integer('max_number_of_steps', None, 'Steps to train for (a resumed run counts '
                   'from its checkpoint); default: forever.')
    define.integer('train_image_size', None, 'Training image size; default: the network\'s '
                   'default image size.')
    define.float('weight_decay', 0.00004, 'The weight decay on the model weights.')
    define.float('label_smoothing', TrainConfig.label_smoothing, 'The amount of label '
                 'smoothing.')
    define.integer('seed', None, 'Seeds Python, numpy and TensorFlow (initial weights, '
                   'dropout, augmentation) and the data order.')
    define.integer('quantize_delay', None, 'Quantization-aware training: fake int8 '
                   'quantization of weights and activations from this step (0: from the '
                   'start; activation ranges are tracked from step 0). Default (or -1): '
                   'float training.')
    define.enum('precision', TrainConfig.precision,
                ['float32', 'mixed_bfloat16', 'mixed_float16'], 'Compute precision: '
                'variables, loss and softmax stay float32; mixed_float16 scales the loss '
                'dynamically. bfloat16 pays only on CPUs with bfloat16 instructions (a '
                'warning says when it will not).')
    define.bool('jit_compile', TrainConfig.jit_compile, 'Compile the training step with '
                'XLA (one device only; on CPUs often slower for conv nets).')
    define.integer('steps_per_loop', TrainConfig.steps_per_loop, 'Training steps per call '
                   'of the compiled loop, at most (calls also end at log lines and after '
                   '~2 s, so a stop signal is honoured quickly).')
    define.integer('divergence_retries', TrainConfig.divergence_retries, 'On a diverged '
                   'loss (non-finite or above --loss_upper_bound) or non-finite weights, '
                   'roll back to the last checkpoint and read on past the batches since, up '
                   'to this many times in a row (the count restarts once a checkpoint is '
                   'saved at or past the step that diverged); then stop. 0: stop at the '
                   'first diverged loss. Not under sync replicas (there 0).')
    define.float('loss_upper_bound', TrainConfig.loss_upper_bound, 'A loss above this '
                 'counts as diverged, as a NaN or infinite one does.')


def optimizer(define):
    define.string('optimizer', OptimizerConfig.optimizer,
                  'One of ' + ', '.join(optimizers.OPTIMIZER_NAMES) + ': TF-Slim\'s TF1 '
                  'rules, nesterov (TF1\'s Momentum with use_nesterov, --momentum), and '
                  'the modern ones (their flags: Modern optimizers).')
    define.float('opt_epsilon', OptimizerConfig.opt_epsilon, 'Epsilon of adadelta, adam '
                 'and rmsprop (TF1 semantics).')
    define.float('adadelta_rho', OptimizerConfig.adadelta_rho, 'The decay rate for '
                 'adadelta.')
    define.float('adagrad_initial_accumulator_value',
                 OptimizerConfig.adagrad_initial_accumulator_value, 'Starting value of the '
                 'AdaGrad accumulators.')
    define.float('adam_beta1', OptimizerConfig.adam_beta1, 'Exponential decay rate of the '
                 '1st moment estimates.')
    define.float('adam_beta2', OptimizerConfig.adam_beta2, 'Exponential decay rate of the '
                 '2nd moment estimates.')
    define.float('ftrl_learning_rate_power', OptimizerConfig.ftrl_learning_rate_power,
                 'The learning rate power.')
    define.float('ftrl_initial_accumulator_value',
                 OptimizerConfig.ftrl_initial_accumulator_value, 'Starting value of the '
                 'FTRL accumulators.')
    define.float('ftrl_l1', OptimizerConfig.ftrl_l1, 'The FTRL l1 regularization strength.')
    define.float('ftrl_l2', OptimizerConfig.ftrl_l2, 'The FTRL l2 regularization strength.')
    define.float('momentum', OptimizerConfig.momentum, 'The momentum of the momentum '
                 'optimizer.')
    define.float('rmsprop_momentum', OptimizerConfig.rmsprop_momentum, 'Momentum of '
                 'rmsprop.')
    define.float('rmsprop_decay', OptimizerConfig.rmsprop_decay, 'Decay term of rmsprop.')
    define.float('clip_gradient_norm', OptimizerConfig.clip_gradient_norm, 'Scale the '
                 'gradients down so that their global norm is at most this (after '
                 'aggregation over replicas); 0: no clipping.')


def learning_rate(define):
    define.string('learning_rate_decay_type', LearningRateConfig.learning_rate_decay_type,
                  'fixed, exponential, polynomial or cosine (over --max_number_of_steps '
                  'after the warmup when set, else over --num_epochs_per_decay).')
    define.float('learning_rate', LearningRateConfig.learning_rate, 'Initial learning '
                 'rate.')
    define.float('end_learning_rate', LearningRateConfig.end_learning_rate, 'Minimal '
                 'learning rate of polynomial and cosine decay.')
    define.float('learning_rate_decay_factor',
                 LearningRateConfig.learning_rate_decay_factor, 'Learning rate decay '
                 'factor.')
    define.float('num_epochs_per_decay', LearningRateConfig.num_epochs_per_decay, 'Epochs '
                 'after which the learning rate decays.')
    define.float('warmup_epochs', LearningRateConfig.warmup_epochs, 'Epochs of linear '
                 'warm-up from 0 to --learning_rate.')
    define.integer('learning_rate_base_batch_size',
                   LearningRateConfig.learning_rate_base_batch_size, '--learning_rate is '
                   'the rate for a global batch of this size (e.g. 256), scaled to the '
                   'run\'s (every replica\'s batch, accumulated micro-batches, sync '
                   'replicas\' aggregated batches) by --learning_rate_base_scale, as '
                   'timm\'s --lr-base; the plan block prints the result. 0: the rate as '
                   'given.')
    define.string('learning_rate_base_scale', LearningRateConfig.learning_rate_base_scale,
                  'linear (the rate times the batch ratio) or sqrt (times its square '
                  'root); default: sqrt for the adaptive optimizers (adadelta, adagrad, '
                  'adam, adamw, lamb: timm\'s rule), linear for the others.')


def fine_tuning(define):
    define.string('checkpoint_exclude_scopes', None, 'Comma-separated variable scopes not '
                  'restored from --checkpoint_path.')
    define.string('trainable_scopes', None, 'Comma-separated scopes to train; default: all '
                  'trainable variables.')
    define.bool('ignore_missing_vars', TrainConfig.ignore_missing_vars, 'Skip variables '
                'missing from --checkpoint_path instead of failing.')
    define.float('layer_decay', OptimizerConfig.layer_decay, 'Layer-wise learning-rate '
                 'decay (BEiT, timm\'s --layer-decay), e.g. 0.75: a variable at depth k of '
                 'a net with layers 0 (stem) .. L (head) trains at this ** (L - k) times '
                 'the rate, with any --optimizer. For the families that say their depths '
                 '(nets/layer_depths.py: ViT, DINOv2, ConvNeXt, ConvNeXt V2, ResNet, '
                 'EfficientNet, EfficientNetV2, MobileNet V2 and V3); the plan '
                 'block prints the first and last scales. 0: off.')
    define.bool('dry_run_restore', TrainingJob.dry_run_restore, 'Print what '
                '--checkpoint_path would restore (restored, excluded, missing, '
                'shape-mismatched and checkpoint-only variables) and exit without '
                'training.')


def checkpoints_and_progress(define):
    define.integer('save_interval_secs', TrainConfig.save_interval_secs, 'Seconds between '
                   'checkpoints.')
    define.integer('max_checkpoints_to_keep', TrainConfig.max_checkpoints_to_keep, 'Most '
                   'recent checkpoints kept.')
    define.bool('checkpoint_input_position', TrainConfig.checkpoint_input_position, 'On '
                'one host, and by each worker of a multi-worker all-reduce, save the '
                'input position with each checkpoint for an exact resume (it holds the '
                'shuffle buffer\'s records: about --shuffle_buffer_size encoded images); '
                '--nocheckpoint_input_position keeps checkpoints small.')
    define.integer('save_summaries_secs', TrainConfig.save_summaries_secs, 'Seconds '
                   'between TensorBoard summaries.')
    define.integer('log_every_n_steps', TrainConfig.log_every_n_steps, 'Steps between log '
                   'lines.')
    define.integer('trace_every_n_steps', None, 'Write a profiler trace of one step every '
                   'this many steps to <train_dir>/plugins/profile (TensorBoard\'s profile '
                   'tab); in a cluster it covers every task.')
