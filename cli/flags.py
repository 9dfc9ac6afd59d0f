"""Every flag of the four scripts, each defined once, with one meaning, in topic groups.

A script names the groups it takes in FLAG_GROUPS and calls define(FLAG_GROUPS,
__doc__); its --help then lists its flags by topic (cli.flag_help), and cli.configs
turns the parsed flags into the frozen configs its job takes. Library code never reads
FLAGS. A name means the same in every script that takes it: where TF-Slim gave one
name two meanings, the second has its own name and slim's name stays as an alias.
Flags mirroring a config dataclass's fields take their defaults from it.
"""
import ast
import dataclasses
import functools
import pathlib
import typing

from absl import flags

from cli import (benchmark_flags, data_service_flags, device_flags, flag_help, predict_job,
                 recipe_flags, startup)
from datasets import dataset_factory
from deployment import cluster, model_deploy
from export import pipeline
from nets import nets_factory
from preprocessing import preprocessing_factory
from training.recipes import learning_rate
from training.recipes import optimizers

SCRIPTS = ('train_image_classifier.py', 'eval_image_classifier.py',
           'export_inference_graph.py', 'download_and_convert_data.py')
# Scripts TF-Slim did not have; their flags follow the same rules.
TOOLKIT_SCRIPTS = ('average_checkpoints.py', 'recompute_batch_norm_statistics.py',
                   'import_keras_weights.py', 'scripts/predict_saved_model.py')
# Flags left unset that mean something else per script: resolved in cli.configs.
DEFAULT_DATASET = 'imagenet'

# The flags below are defined on behalf of the script calling define(): absl files them
# under that script, so its --helpfull and its flags.txt (cli.run_record) list them.
flags.disclaim_key_flags()


class _Define:
    """absl's DEFINE_* functions, into one FlagValues."""

    def __init__(self, flag_values: flags.FlagValues):
        self.flag_values = flag_values
        for kind in ('string', 'integer', 'float', 'bool', 'enum', 'list'):
            setattr(self, kind, functools.partial(getattr(flags, f'DEFINE_{kind}'),
                                                  flag_values=flag_values))

    def alias(self, name: str, original: str, help_text: str):
        flags.DEFINE_alias(name, original, flag_values=self.flag_values)
        self.flag_values[name].help = help_text

    def from_dataclass(self, config_class, helps: dict):
        """One flag per field of config_class, with the field's default and type."""
        hints = typing.get_type_hints(config_class)
        kinds = {bool: self.bool, int: self.integer, float: self.float, str: self.string}
        for field in dataclasses.fields(config_class):
            kinds[hints[field.name]](field.name, field.default, helps[field.name])


def _model(define):
    define.string('model_name', 'inception_v3', 'The network, one of: '
                  + ', '.join(nets_factory.network_names()) + '.')
    define.string('preprocessing_name', None, 'The preprocessing family, one of: '
                  + ', '.join(preprocessing_factory.available_names())
                  + ', or a model name for its family; default: --model_name\'s.')
    define.integer('labels_offset', 0, 'Labels to subtract from the dataset\'s: train a '
                   '1000-class net on data whose class 0 is "background" with 1.')
    define.bool('use_grayscale', False, 'Convert images to one grey channel.')
    define.float('batch_norm_decay', None, 'Decay of the batch-norm moving averages per '
                 'step, for nets with batch norm; default: the family\'s (TF-Slim\'s '
                 '0.9997 for Inception and MobileNet v1, 0.997 for ResNet and MobileNet '
                 'v2/v3). After n steps decay**n of each moving statistic is still its '
                 'initial value: a short training from scratch wants a smaller one, e.g. '
                 '0.99 (docs/training.md#batch-norm-statistics).')
    define.float('batch_norm_epsilon', None, 'Batch norm\'s epsilon, for nets with batch '
                 'norm; default: the family\'s. Evaluate and export with the training\'s.')


def _batch_norm_statistics(define):
    define.integer('recompute_batch_norm_statistics', None, 'First recompute the '
                   'checkpoint\'s batch-norm moving statistics as the exact average over '
                   'this many batches of the training split (training preprocessing, '
                   '--batch_size each), written as a new checkpoint in '
                   '--batch_norm_statistics_dir; then use that. Unset: the checkpoint\'s.')
    define.string('batch_norm_statistics_dir', None, 'Where the checkpoint with recomputed '
                  'statistics goes; default: batch_norm_statistics/ beside the checkpoint.')


def _dataset(define):
    define.string('dataset_name', None, 'The dataset, one of: '
                  + ', '.join(dataset_factory.dataset_names())
                  + f', or {dataset_factory.TFDS_PREFIX}<name>[/<config>] for a TensorFlow '
                  'Datasets dataset (--dataset_dir is its data_dir). To export: the one the '
                  'model was trained on (its classes, channels and class names). Default: '
                  f'{DEFAULT_DATASET}; download_and_convert_data.py needs it named.')
    define.string('dataset_dir', None, 'The converted dataset: its TFRecords and '
                  'labels.txt, as download_and_convert_data.py writes them (creating the '
                  'directory, downloads kept there too). To export: parity-check and int8 '
                  'calibration images and class names; default: seeded synthetic images '
                  'and the dataset\'s built-in class names.')


def _split(define):
    define.string('dataset_split_name', None, 'The split to read; default: train to train, '
                  'test to evaluate and to predict.')


def _input_pipeline(define):
    define.string('file_pattern', None, 'Override of the dataset\'s file name pattern, '
                  'relative to --dataset_dir, with %s for the split.')
    define.integer('batch_size', None, 'Examples per batch on each clone (as TF-Slim); '
                   'default: 32 to train, 100 to evaluate.')
    define.integer('num_readers', None, 'TFRecord files read in parallel; default: tuned '
                   'by tf.data (AUTOTUNE).')
    define.integer('num_preprocessing_threads', None, 'Images decoded and preprocessed in '
                   'parallel; default: tuned by tf.data (AUTOTUNE).')
    define.integer('shuffle_buffer_size', 2048, 'Training records shuffled at once (after '
                   'the shard order is shuffled).')
    define.bool('deterministic', False, 'Read training data in a reproducible order (with '
                '--seed); slower.')
    define.bool('cache', False, 'Keep the split\'s records in memory after the first pass '
                '(small datasets).')


def _weights(define):
    define.string('checkpoint_path', None, 'A checkpoint prefix, or a directory whose '
                  'latest checkpoint is taken; a TF-Slim or toolkit checkpoint. Training '
                  'starts from it when --train_dir has none (fine-tuning); evaluation '
                  'evaluates it (or, with --eval_interval_secs, watches that train_dir); '
                  'export exports it (default: freshly initialised weights).')
    define.float('moving_average_decay', None, 'The decay of the exponential moving '
                 'average of the model variables (e.g. 0.9999), kept in the training\'s '
                 'checkpoints; evaluation and export then use the averaged weights (any '
                 'value: the checkpoint holds them). Unset: no moving averages, the raw '
                 'weights.')


def _quantization(define):
    define.bool('quantize', False, 'Use the quantized model of a quantization-aware '
                'checkpoint (--quantize_delay in training): fake int8 quantization on the '
                'learned ranges to evaluate, the int8 TFLite on them to export. Such a '
                'checkpoint is detected without it; with it, a float checkpoint is an '
                'error.')


def _devices(define):
    define.integer('num_clones', 1, 'Model clones (replicas) on this machine, each taking '
                   '--batch_size examples a step.')
    define.bool('clone_on_cpu', False, 'Put the clones on logical CPU devices.')
    define.string('master', '', 'TF-Slim\'s TF1 session target: accepted so slim\'s command '
                  'lines run unchanged, and not needed (a cluster is --worker_hosts, '
                  '--ps_hosts or TF_CONFIG).')


def _cluster(define):
    """The cluster, as TF1's distributed trainers named it (else TF_CONFIG or SLURM)."""
    define.enum('strategy', 'auto', list(model_deploy.STRATEGIES), 'Force a distribution '
                'strategy; auto chooses from --num_clones, --worker_replicas and '
                '--num_ps_tasks.')
    define.integer('worker_replicas', 1, 'Number of worker machines.')
    define.integer('num_ps_tasks', 0, 'Number of parameter servers; 0 means variables live '
                   'on the workers.')
    define.bool('sync_replicas', False, 'Synchronise the worker replicas\' updates over the '
                'parameter servers.')
    define.integer('replicas_to_aggregate', 1, 'Gradients to collect before each update '
                   '(--sync_replicas).')
    define.string('ps_hosts', None, 'Comma-separated host:port of the parameter servers.')
    define.string('worker_hosts', None, 'Comma-separated host:port of the workers; the '
                  'first is the chief.')
    define.enum('job_name', None, ['ps', 'worker', *data_service_flags.JOB_NAMES],
                'This process\'s job in the cluster; with --task, which task it is. '
                'data_dispatcher and data_worker serve the tf.data service instead (see '
                '--data_service_address).')
    define.integer('task', 0, 'This task\'s index in its job (--job_name); worker 0 is the '
                   'chief.')
    define.alias('task_id', 'task', 'TF1\'s distributed trainers\' name for --task.')
    define.float('wait_for_chief_secs', 60, 'How long a ps or worker task keeps serving '
                 'after the chief became unreachable (a restarted chief resumes within '
                 'it); then it exits.')
    define.integer('slurm_base_port', cluster.SLURM_BASE_PORT, 'Under SLURM, task k of a '
                   'node listens on this port + k.')


def _training(define):
    define.string('train_dir', '/tmp/tfmodel/', 'Where checkpoints and event logs are '
                  'written.')
    define.integer('max_number_of_steps', None, 'Steps to train for (a resumed run counts '
                   'from its checkpoint); default: forever.')
    define.integer('train_image_size', None, 'Training image size; default: the network\'s '
                   'default image size.')
    define.float('weight_decay', 0.00004, 'The weight decay on the model weights.')
    define.float('label_smoothing', 0.0, 'The amount of label smoothing.')
    define.integer('seed', None, 'Seeds Python, numpy and TensorFlow (initial weights, '
                   'dropout, augmentation) and the data order.')
    define.integer('quantize_delay', None, 'Quantization-aware training: fake int8 '
                   'quantization of weights and activations from this step (0: from the '
                   'start; activation ranges are tracked from step 0). Default (or -1): '
                   'float training.')
    define.enum('precision', 'float32', ['float32', 'mixed_bfloat16', 'mixed_float16'],
                'Compute precision: variables, loss and softmax stay float32; '
                'mixed_float16 scales the loss dynamically. bfloat16 pays only on CPUs '
                'with bfloat16 instructions (a warning says when it will not).')
    define.bool('jit_compile', False, 'Compile the training step with XLA (one device '
                'only; on CPUs often slower for conv nets).')
    define.integer('steps_per_loop', 100, 'Training steps per call of the compiled loop, at '
                   'most (calls also end at log lines and after ~2 s, so a stop signal is '
                   'honoured quickly).')


def _checkpoints_and_progress(define):
    define.integer('save_interval_secs', 600, 'Seconds between checkpoints.')
    define.integer('max_checkpoints_to_keep', 5, 'Most recent checkpoints kept.')
    define.bool('checkpoint_input_position', True, 'On one host, save the input position '
                'with each checkpoint for an exact resume (it holds the shuffle buffer\'s '
                'records: about --shuffle_buffer_size encoded images); '
                '--nocheckpoint_input_position keeps checkpoints small.')
    define.integer('save_summaries_secs', 600, 'Seconds between TensorBoard summaries.')
    define.integer('log_every_n_steps', 10, 'Steps between log lines.')
    define.integer('trace_every_n_steps', None, 'Write a profiler trace of one step every '
                   'this many steps to <train_dir>/plugins/profile (TensorBoard\'s profile '
                   'tab); in a cluster it covers every task.')


def _fine_tuning(define):
    define.string('checkpoint_exclude_scopes', None, 'Comma-separated variable scopes not '
                  'restored from --checkpoint_path.')
    define.string('trainable_scopes', None, 'Comma-separated scopes to train; default: all '
                  'trainable variables.')
    define.bool('ignore_missing_vars', False, 'Skip variables missing from '
                '--checkpoint_path instead of failing.')
    define.bool('dry_run_restore', False, 'Print what --checkpoint_path would restore '
                '(restored, excluded, missing, shape-mismatched and checkpoint-only '
                'variables) and exit without training.')


def _optimizer(define):
    define.from_dataclass(optimizers.OptimizerConfig, {
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
                              'most this (after aggregation over replicas); 0: no clipping.',
    })


def _learning_rate(define):
    define.from_dataclass(learning_rate.LearningRateConfig, {
        'learning_rate_decay_type': 'fixed, exponential, polynomial or cosine (over '
                                    '--max_number_of_steps after the warmup when set, else '
                                    'over --num_epochs_per_decay).',
        'learning_rate': 'Initial learning rate.',
        'end_learning_rate': 'Minimal learning rate of polynomial and cosine decay.',
        'learning_rate_decay_factor': 'Learning rate decay factor.',
        'num_epochs_per_decay': 'Epochs after which the learning rate decays.',
        'warmup_epochs': 'Epochs of linear warm-up from 0 to --learning_rate.',
    })


def _evaluation(define):
    define.string('eval_dir', '/tmp/tfmodel/', 'Where metrics.json, metrics.jsonl and the '
                  'event file are written.')
    define.integer('eval_image_size', None, 'Eval image size; default: the network\'s '
                   'default image size.')
    define.integer('max_num_batches', None, 'Evaluate only this many batches; default: the '
                   'whole split, once.')
    define.list('top_k', ['1', '5'], 'Top-k recalls to report (k=1 is Accuracy, k=5 '
                'slim\'s Recall_5), each for k below the number of classes (above, it is '
                'always 1).')


def _continuous_evaluation(define):
    define.float('eval_interval_secs', None, 'Evaluate continuously: watch the train_dir '
                 '--checkpoint_path, looking for new checkpoints every this many seconds, '
                 'and evaluate each once, in order, until the training\'s last (the step of '
                 'its --max_number_of_steps). Unset: evaluate one checkpoint and exit.')
    define.float('eval_timeout_secs', None, 'With --eval_interval_secs: stop when no new '
                 'checkpoint came for this many seconds. Unset: wait for the training\'s '
                 'last checkpoint.')
    define.bool('backfill', False, 'With --eval_interval_secs: also evaluate the '
                'checkpoints already in the train_dir, oldest first (default: start from '
                'the newest). Checkpoints evaluated before into --eval_dir are skipped '
                'either way.')


def _image_size(define):
    define.integer('image_size', None, 'Input height and width; default: the network\'s '
                   'default image size.')


def _exported_model(define):
    # TF-Slim's --batch_size here; --batch_size means examples per clone elsewhere.
    define.integer('graph_batch_size', None, 'Batch size of the GraphDef\'s and the TFLite '
                   'model\'s input; default: any for graphs, 1 for TFLite. The SavedModel '
                   'takes any batch.')
    define.alias('batch_size', 'graph_batch_size', 'TF-Slim\'s name for --graph_batch_size.')
    define.bool('is_video_model', False, 'The network takes clips [batch, frames, height, '
                'width, channels] (i3d, s3dg).')
    define.integer('num_frames', None, 'Frames per clip of a video model; default: the '
                   'network\'s.')
    define.bool('is_training', False, 'Write the training-mode graph (dropout and batch '
                'norm on batch statistics); --export_format=graphdef only.')


def _export_formats(define):
    define.list('export_format', None, 'One or several of: ' + ', '.join(pipeline.FORMATS)
                + '. Default: saved_model with --saved_model_dir or --export_dir; with '
                '--output_file graphdef, or frozen_graph given --checkpoint_path.')
    define.string('export_dir', None, 'Directory for the formats, under fixed names: '
                  'saved_model/, inference_graph.pb, frozen_graph.pb, model_float.tflite, '
                  'model_int8.tflite, slim_checkpoint/model.ckpt, plus labels.txt.')
    define.string('output_file', None, 'The one graph or TFLite file asked for; alone, '
                  'TF-Slim\'s inference GraphDef, frozen given --checkpoint_path.')
    define.bool('write_text_graphdef', False, 'Write GraphDefs as text (.pbtxt).')
    define.bool('include_preprocessing', False, 'Accepted for older commands; every '
                'image SavedModel now preprocesses uint8, encoded and tf.Example inputs.')
    define.enum('tflite_io_dtype', 'uint8', ['uint8', 'float32'], 'Input and output type of '
                'the int8 TFLite model.')


def _saved_model(define):
    define.string('saved_model_dir', None, 'The SavedModel\'s directory: export writes it '
                  'there (instead of <export_dir>/saved_model), prediction loads it (or '
                  'an --export_dir holding saved_model/).')


def _existing_output(define):
    define.bool('overwrite', False, 'Replace existing exports (and a labels.txt naming '
                'other classes), an averaged checkpoint of the same step, or an '
                'imported one in a non-empty --output_dir; convert an image_folder whose '
                'source changed again.')


def _checkpoint_averaging(define):
    define.string('checkpoint_dir', None, 'A training\'s --train_dir: its newest '
                  '--num_checkpoints intact checkpoints are averaged.')
    define.list('checkpoint_prefixes', None, 'Instead of --checkpoint_dir, the checkpoints '
                'to average, comma-separated (e.g. /tmp/train/model.ckpt-600,'
                '/tmp/train/model.ckpt-800); checkpoints of one network.')
    define.integer('num_checkpoints', 5, 'How many of --checkpoint_dir\'s newest '
                   'checkpoints to average (at least 2).')


def _checkpoint_output(define):
    define.string('output_dir', None, 'Where the new checkpoint goes, with its own '
                  '`checkpoint` file (averaged: model.ckpt-<newest step>; imported from '
                  'Keras: model.ckpt-0): pass this directory as --checkpoint_path to '
                  'training (fine-tuning), evaluation and export.')


def _keras_weights(define):
    define.string('keras_weights', None, 'The Keras application\'s weights for '
                  '--model_name: a .h5 or .weights.h5 file of that application (all of it '
                  'is loaded), or imagenet for Keras\'s ImageNet weights (downloaded into '
                  'Keras\'s cache, ~/.keras/models, unless already there).')


def _parity_check(define):
    define.float('parity_tolerance', 1e-4, 'Largest logit difference of float formats, '
                 'relative to the largest logit.')
    define.float('min_int8_agreement', 0.95, 'Smallest top-1 agreement of the int8 model '
                 'with the float model.')
    define.integer('num_parity_examples', 64, 'Images run through each export and the '
                   'model.')
    define.string('parity_split_name', 'validation', 'Split of --dataset_dir the parity '
                  'images come from.')
    define.integer('num_calibration_examples', 100, 'Images calibrating the int8 model\'s '
                   'ranges.')
    define.string('calibration_split_name', 'train', 'Split of --dataset_dir the '
                  'calibration images come from.')


def _conversion(define):
    define.bool('keep_archives', False, 'Keep the downloaded archives after conversion '
                '(TF-Slim deleted them). Kept archives are verified and reused, not '
                'downloaded again, when the conversion is re-run.')
    define.string('source_dir', None, 'Data you provide. image_folder: a directory with '
                  'one sub-directory of images per class, or train/, val/, test/ holding '
                  'such class directories. imagenet: a directory holding '
                  'ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar, or train/ (one '
                  'directory per synset) and val/ extracted from them. visualwakewords: a '
                  'COCO 2014 directory with train2014/, val2014/ and '
                  'annotations/instances_{train,val}2014.json.')
    define.float('validation_percentage', 10.0, 'image_folder: percentage of each class '
                 'held out for the validation split (seeded, stratified); not for a '
                 'source split already.')
    define.integer('train_shards', None, 'Shards of the train split; default: the '
                   'dataset\'s (imagenet 1024, visualwakewords 100, image_folder one per '
                   '1,000 images).')
    define.integer('validation_shards', None, 'Shards of the validation split; default: '
                   'the dataset\'s (imagenet 128, visualwakewords 10).')
    define.string('bounding_boxes', None, 'imagenet: the bounding-box annotations, '
                  'ILSVRC2012_bbox_train_v2.tar.gz or its extracted directory of XML files '
                  '(optional).')
    define.float('small_object_area_threshold', 0.005, 'visualwakewords: objects smaller '
                 'than this fraction of the image do not count.')
    define.string('foreground_class_of_interest', 'person', 'visualwakewords: the COCO '
                  'category that makes label 1.')
    define.integer('num_workers', None, 'Images encoded in parallel; default: one per '
                   'core.')


def _logging(define):
    # Read before TensorFlow loads (cli.startup); defined here for --help and parsing.
    define.enum('tf_log_level', startup.DEFAULT_TF_LOG_LEVEL, startup.TF_LOG_LEVELS,
                'TensorFlow\'s own log output: info, warning, error or none (default: '
                'none; a failure that stops the script is its one ERROR: line, and error '
                'shows TensorFlow\'s error lines too, e.g. a cluster peer\'s failures).')


# Title -> definer; a script's --help shows its groups in the order it names them.
GROUPS = {
    'Model': _model,
    'Dataset': _dataset,
    'Split': _split,
    'Input pipeline': _input_pipeline,
    'Weights': _weights,
    'Quantization': _quantization,
    'Training': _training,
    'Augmentation': recipe_flags.augmentation,
    'Batch recipes': recipe_flags.batch_recipes,
    'Stochastic depth': recipe_flags.stochastic_depth,
    'Distillation': recipe_flags.distillation,
    'Optimizer': _optimizer,
    'Learning rate': _learning_rate,
    'Fine-tuning': _fine_tuning,
    'Checkpoints and progress': _checkpoints_and_progress,
    'Devices': _devices,
    'Device performance': device_flags.device_performance,
    'Cluster': _cluster,
    'Evaluation': _evaluation,
    'Batch-norm statistics': _batch_norm_statistics,
    'Continuous evaluation': _continuous_evaluation,
    'Image size': _image_size,
    'Exported model': _exported_model,
    'Export formats': _export_formats,
    'SavedModel': _saved_model,
    'Prediction': predict_job.prediction,
    'Existing output': _existing_output,
    'Checkpoint averaging': _checkpoint_averaging,
    'Keras weights': _keras_weights,
    'Checkpoint output': _checkpoint_output,
    'Parity check': _parity_check,
    'Conversion': _conversion,
    'Logging': _logging,
    'Benchmark': benchmark_flags.benchmark,
    'tf.data service': data_service_flags.data_service_group,
}


def define(group_titles, usage: str = None, flag_values: flags.FlagValues = flags.FLAGS):
    """Defines the flags of the named groups and a --help listing them by topic, after
    usage; returns the sections [(title, [flag name, ...])] in that order."""
    unknown = [title for title in group_titles if title not in GROUPS]
    if unknown:
        raise ValueError(f'No flag group {", ".join(unknown)}; the groups are '
                         f'{", ".join(GROUPS)}.')
    sections = []
    for title in group_titles:
        before = set(flag_values)
        GROUPS[title](_Define(flag_values))
        sections.append((title, [name for name in flag_values if name not in before]))
    flag_help.install(sections, usage, flag_values)
    return sections


def declared_groups(script_path) -> tuple:
    """The FLAG_GROUPS a script declares, read from its source without running it:
    importing two scripts would define both's flags into absl's one global FLAGS."""
    tree = ast.parse(pathlib.Path(script_path).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                getattr(target, 'id', None) == 'FLAG_GROUPS' for target in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise ValueError(f'{script_path} declares no FLAG_GROUPS.')
