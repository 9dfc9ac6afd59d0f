"""Every command-line flag of the scripts, each defined once, in groups.

Scripts call the `define_*` functions they need, then `flags.adopt_module_key_flags`
on this module so `--help` lists them, then cli.configs to turn parsed flags into
frozen config objects. Flags that mirror a config dataclass field take their default
from it, so the two cannot drift apart. Library code never reads FLAGS.
"""
import dataclasses
import typing

from absl import flags

from cli import startup
from datasets import dataset_factory
from deployment import cluster, model_deploy
from nets import nets_factory
from preprocessing import preprocessing_factory
from training import learning_rate, optimizers


def _define_from_dataclass(config_class, helps):
    """One flag per field of config_class, with the field's default and type."""
    hints = typing.get_type_hints(config_class)
    definers = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer,
                float: flags.DEFINE_float, str: flags.DEFINE_string}
    for field in dataclasses.fields(config_class):
        definers[hints[field.name]](field.name, field.default, helps[field.name])


def define_tf_log_level_flag():
    """Read before TensorFlow loads (cli.startup); defined here for --help and parsing."""
    flags.DEFINE_enum('tf_log_level', startup.DEFAULT_TF_LOG_LEVEL, startup.TF_LOG_LEVELS,
                      'TensorFlow\'s own log output: info, warning, error or none '
                      '(default: errors only).')


# --- Dataset, model and preprocessing: train, eval and export. ---

def define_model_flags():
    flags.DEFINE_string('model_name', 'inception_v3', 'The network, one of: '
                        + ', '.join(nets_factory.network_names()) + '.')
    flags.DEFINE_integer('labels_offset', 0, 'Labels to subtract from the dataset\'s: '
                         'train a 1000-class net on data whose class 0 is "background" '
                         'with 1.')
    flags.DEFINE_bool('use_grayscale', False, 'Convert images to one grey channel.')


def define_dataset_name_flag(default, purpose):
    flags.DEFINE_string('dataset_name', default, f'{purpose}, one of: '
                        + ', '.join(dataset_factory.dataset_names())
                        + f', or {dataset_factory.TFDS_PREFIX}<name>[/<config>] for a '
                        'TensorFlow Datasets dataset (--dataset_dir is its data_dir).')


def define_dataset_flags(default_split):
    define_dataset_name_flag('imagenet', 'The dataset')
    flags.DEFINE_string('dataset_split_name', default_split, 'The split to read.')
    flags.DEFINE_string('dataset_dir', None, 'Where the dataset\'s TFRecords are '
                        '(written by download_and_convert_data.py).')
    flags.DEFINE_string('file_pattern', None, 'Override of the dataset\'s file name '
                        'pattern, relative to --dataset_dir, with %s for the split.')
    flags.DEFINE_string('preprocessing_name', None, 'The preprocessing family, one of: '
                        + ', '.join(preprocessing_factory.available_names())
                        + ', or a model name for its family; default: --model_name\'s.')
    flags.DEFINE_integer('num_readers', None, 'TFRecord files read in parallel; '
                         'default: tuned by tf.data (AUTOTUNE).')
    flags.DEFINE_integer('num_preprocessing_threads', None, 'Images decoded and '
                         'preprocessed in parallel; default: tuned by tf.data (AUTOTUNE).')
    flags.DEFINE_integer('shuffle_buffer_size', 2048, 'Training records shuffled at '
                         'once (after the shard order is shuffled).')
    flags.DEFINE_bool('deterministic', False, 'Read training data in a reproducible '
                      'order (with --seed); slower.')
    flags.DEFINE_bool('cache', False, 'Keep the split\'s records in memory after the '
                      'first pass (small datasets).')
    flags.DEFINE_integer('batch_size', None, 'Examples per batch (per clone in '
                         'training). Default: 32 to train, 100 to evaluate.')


# --- Training only. ---

def define_clone_flags():
    """Replicas on this machine: training's clones, and evaluation's."""
    flags.DEFINE_integer('num_clones', 1, 'Model clones (replicas) on this machine.')
    flags.DEFINE_bool('clone_on_cpu', False, 'Put the clones on logical CPU devices.')


def define_deployment_flags():
    define_clone_flags()
    flags.DEFINE_integer('worker_replicas', 1, 'Number of worker machines.')
    flags.DEFINE_integer('num_ps_tasks', 0, 'Number of parameter servers; 0 means '
                         'variables live on the workers.')
    flags.DEFINE_integer('task', 0, 'This task\'s index in its job (--job_name); '
                         'worker 0 is the chief.')
    flags.DEFINE_bool('sync_replicas', False, 'Synchronise the worker replicas\' updates '
                      'over the parameter servers.')
    flags.DEFINE_integer('replicas_to_aggregate', 1, 'Gradients to collect before '
                         'each update (--sync_replicas).')
    define_cluster_flags()


def define_cluster_flags():
    """The cluster, as TF1's distributed trainers named it (else TF_CONFIG or SLURM)."""
    flags.DEFINE_alias('task_id', 'task')
    flags.DEFINE_string('ps_hosts', None, 'Comma-separated host:port of the parameter '
                        'servers.')
    flags.DEFINE_string('worker_hosts', None, 'Comma-separated host:port of the workers; '
                        'the first is the chief.')
    flags.DEFINE_enum('job_name', None, ['ps', 'worker'], 'This process\'s job in the '
                      'cluster; with --task, which task it is.')
    flags.DEFINE_enum('strategy', 'auto', list(model_deploy.STRATEGIES), 'Force a '
                      'distribution strategy; auto chooses from --num_clones, '
                      '--worker_replicas and --num_ps_tasks.')
    flags.DEFINE_float('wait_for_chief_secs', 60, 'How long a ps or worker task keeps '
                       'serving after the chief became unreachable (a restarted chief '
                       'resumes within it); then it exits.')
    flags.DEFINE_integer('slurm_base_port', cluster.SLURM_BASE_PORT, 'Under SLURM, task '
                         'k of a node listens on this port + k.')


def define_training_flags():
    flags.DEFINE_string('train_dir', '/tmp/tfmodel/',
                        'Where checkpoints and event logs are written.')
    flags.DEFINE_integer('train_image_size', None, 'Training image size; default: the '
                         'network\'s default image size.')
    flags.DEFINE_integer('max_number_of_steps', None, 'Steps to train for (a resumed '
                         'run counts from its checkpoint); default: forever.')
    flags.DEFINE_integer('log_every_n_steps', 10, 'Steps between log lines.')
    flags.DEFINE_integer('trace_every_n_steps', None, 'Write a profiler trace of one '
                         'step every this many steps to <train_dir>/plugins/profile '
                         '(TensorBoard\'s profile tab); in a cluster it covers every task.')
    flags.DEFINE_integer('steps_per_loop', 100, 'Training steps per call of the compiled '
                         'loop, at most (calls also end at log lines and after ~2 s, so '
                         'a stop signal is honoured quickly).')
    flags.DEFINE_enum('precision', 'float32', ['float32', 'mixed_bfloat16', 'mixed_float16'],
                      'Compute precision: variables, loss and softmax stay float32; '
                      'mixed_float16 scales the loss dynamically. bfloat16 pays only on '
                      'CPUs with bfloat16 instructions (a warning says when it will not).')
    flags.DEFINE_bool('jit_compile', False, 'Compile the training step with XLA (one '
                      'device only; on CPUs often slower for conv nets).')
    flags.DEFINE_bool('checkpoint_input_position', True, 'On one device, save the input '
                      'position with each checkpoint for an exact resume (it holds the '
                      'shuffle buffer\'s records: about --shuffle_buffer_size encoded '
                      'images); --nocheckpoint_input_position keeps checkpoints small.')
    flags.DEFINE_integer('save_summaries_secs', 600, 'Seconds between TensorBoard '
                         'summaries.')
    flags.DEFINE_integer('save_interval_secs', 600, 'Seconds between checkpoints.')
    flags.DEFINE_integer('max_checkpoints_to_keep', 5, 'Most recent checkpoints kept.')
    flags.DEFINE_float('weight_decay', 0.00004, 'The weight decay on the model weights.')
    flags.DEFINE_float('label_smoothing', 0.0, 'The amount of label smoothing.')
    flags.DEFINE_integer('seed', None, 'Seeds Python, numpy and TensorFlow (initial '
                         'weights, dropout, augmentation) and the data order.')
    # Fine-tuning.
    define_checkpoint_flag('Checkpoint to start from when --train_dir has none (a '
                           'TF-Slim or toolkit checkpoint).')
    flags.DEFINE_string('checkpoint_exclude_scopes', None, 'Comma-separated variable '
                        'scopes not restored from --checkpoint_path.')
    flags.DEFINE_string('trainable_scopes', None, 'Comma-separated scopes to train; '
                        'default: all trainable variables.')
    flags.DEFINE_bool('ignore_missing_vars', False, 'Skip variables missing from '
                      '--checkpoint_path instead of failing.')
    flags.DEFINE_bool('dry_run_restore', False, 'Print what --checkpoint_path would '
                      'restore (restored, excluded, missing, shape-mismatched and '
                      'checkpoint-only variables) and exit without training.')
    flags.DEFINE_integer('quantize_delay', None, 'Quantization-aware training: fake int8 '
                         'quantization of weights and activations from this step (0: '
                         'from the start; activation ranges are tracked from step 0). '
                         'Default (or -1): float training.')
    _define_from_dataclass(optimizers.OptimizerConfig, {
        'optimizer': 'One of ' + ', '.join(optimizers.OPTIMIZER_NAMES) + '.',
        'opt_epsilon': 'Epsilon of adadelta, adam and rmsprop (TF1 semantics).',
        'adadelta_rho': 'The decay rate for adadelta.',
        'adagrad_initial_accumulator_value': 'Starting value of the AdaGrad accumulators.',
        'adam_beta1': 'Exponential decay rate of the 1st moment estimates.',
        'adam_beta2': 'Exponential decay rate of the 2nd moment estimates.',
        'ftrl_learning_rate_power': 'The learning rate power.',
        'ftrl_initial_accumulator_value': 'Starting value of the FTRL accumulators.',
        'ftrl_l1': 'The FTRL l1 regularization strength.',
        'ftrl_l2': 'The FTRL l2 regularization strength.',
        'momentum': 'The momentum of the momentum optimizer.',
        'rmsprop_momentum': 'Momentum of rmsprop.',
        'rmsprop_decay': 'Decay term of rmsprop.',
        'clip_gradient_norm': 'Scale the gradients down so that their global norm is at '
                              'most this (after aggregation over replicas); 0: no '
                              'clipping.',
    })
    _define_from_dataclass(learning_rate.LearningRateConfig, {
        'learning_rate_decay_type': 'fixed, exponential, polynomial or cosine (over '
                                    '--max_number_of_steps after the warmup when set, '
                                    'else over --num_epochs_per_decay).',
        'learning_rate': 'Initial learning rate.',
        'end_learning_rate': 'Minimal learning rate of polynomial and cosine decay.',
        'learning_rate_decay_factor': 'Learning rate decay factor.',
        'num_epochs_per_decay': 'Epochs after which the learning rate decays.',
        'warmup_epochs': 'Epochs of linear warm-up from 0 to --learning_rate.',
    })


def define_moving_average_flag(purpose):
    flags.DEFINE_float('moving_average_decay', None, 'The decay of the exponential '
                       f'moving average of the model variables; {purpose}. Unset: no '
                       'moving averages.')


# --- Evaluation and export. ---

def define_checkpoint_flag(help_text):
    flags.DEFINE_string('checkpoint_path', None, help_text)


def define_continuous_eval_flags():
    """eval_image_classifier.py: what to measure, and following a training."""
    flags.DEFINE_list('top_k', ['1', '5'], 'Top-k recalls to report (k=1 is Accuracy, '
                      'k=5 slim\'s Recall_5).')
    flags.DEFINE_float('eval_interval_secs', None, 'Evaluate continuously: watch the '
                       'train_dir --checkpoint_path, looking for new checkpoints every this '
                       'many seconds, and evaluate each once, in order, until the '
                       'training\'s last (the step of its --max_number_of_steps). Unset: '
                       'evaluate one checkpoint and exit.')
    flags.DEFINE_float('eval_timeout_secs', None, 'With --eval_interval_secs: stop when no '
                       'new checkpoint came for this many seconds. Unset: wait for the '
                       'training\'s last checkpoint.')
    flags.DEFINE_bool('backfill', False, 'With --eval_interval_secs: also evaluate the '
                      'checkpoints already in the train_dir, oldest first (default: start '
                      'from the newest). Checkpoints evaluated before into --eval_dir are '
                      'skipped either way.')




# --- Conversion (download_and_convert_data.py). ---

def define_conversion_flags():
    flags.DEFINE_string('dataset_dir', None,
                        'Directory the TFRecords and labels.txt are written to (created if '
                        'missing); downloads are stored there too. For tfds:<name>, the '
                        'TFDS data_dir.')
    flags.DEFINE_bool('keep_archives', False,
                      'Keep the downloaded archives after conversion (TF-Slim deleted '
                      'them). Kept archives are verified and reused, not downloaded again, '
                      'when the conversion is re-run.')
    flags.DEFINE_string('source_dir', None, 'Data you provide. image_folder: a directory '
                        'with one sub-directory of images per class. imagenet: a directory '
                        'holding ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar, or '
                        'train/ (one directory per synset) and val/ extracted from them. '
                        'visualwakewords: a COCO 2014 directory with train2014/, val2014/ '
                        'and annotations/instances_{train,val}2014.json.')
    flags.DEFINE_float('validation_percentage', 10.0, 'image_folder: percentage of each '
                       'class held out for the validation split (seeded, stratified).')
    flags.DEFINE_integer('train_shards', None, 'Shards of the train split; default: the '
                         'dataset\'s (imagenet 1024, visualwakewords 100, image_folder one '
                         'per 1,000 images).')
    flags.DEFINE_integer('validation_shards', None, 'Shards of the validation split; '
                         'default: the dataset\'s (imagenet 128, visualwakewords 10).')
    flags.DEFINE_string('bounding_boxes', None, 'imagenet: the bounding-box annotations, '
                        'ILSVRC2012_bbox_train_v2.tar.gz or its extracted directory of '
                        'XML files (optional).')
    flags.DEFINE_float('small_object_area_threshold', 0.005, 'visualwakewords: objects '
                       'smaller than this fraction of the image do not count.')
    flags.DEFINE_string('foreground_class_of_interest', 'person', 'visualwakewords: the '
                        'COCO category that makes label 1.')
    flags.DEFINE_integer('num_workers', None, 'Images encoded in parallel; default: one '
                         'per core.')
