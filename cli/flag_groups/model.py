"""Flag groups of the network and the weights it starts from: Model, Image size, Weights,
Quantization, Batch-norm statistics."""
from absl import flags

from cli.assembly import DataConfig
from cli.export_job import ExportConfig
from nets import nets_factory
from preprocessing import preprocessing_factory

# The flags belong to the script calling cli.flags.define(): absl files them under it, so
# its --helpfull and its flags.txt (cli.run_record) list them.
flags.disclaim_key_flags()


def model(define):
    define.string('model_name', 'inception_v3', 'The network, one of: '
                  + ', '.join(nets_factory.network_names()) + '.')
    define.string('preprocessing_name', None, 'The preprocessing family, one of: '
                  + ', '.join(preprocessing_factory.available_names())
                  + ', or a model name for its family; default: --model_name\'s.')
    define.integer('labels_offset', DataConfig.labels_offset, 'Labels to subtract from the '
                   'dataset\'s: train a 1000-class net on data whose class 0 is '
                   '"background" with 1.')
    define.bool('use_grayscale', DataConfig.use_grayscale, 'Convert images to one grey '
                'channel.')
    define.float('batch_norm_decay', None, 'Decay of the batch-norm moving averages per '
                 'step, for nets with batch norm; default: the family\'s (TF-Slim\'s '
                 '0.9997 for Inception and MobileNet v1, 0.997 for ResNet and MobileNet '
                 'v2/v3). After n steps decay**n of each moving statistic is still its '
                 'initial value: a short training from scratch wants a smaller one, e.g. '
                 '0.99 (docs/training.md#batch-norm-statistics).')
    define.float('batch_norm_epsilon', None, 'Batch norm\'s epsilon, for nets with batch '
                 'norm; default: the family\'s. Evaluate and export with the training\'s.')


def image_size(define):
    define.integer('image_size', None, 'Input height and width; default: the network\'s '
                   'default image size.')


def weights(define):
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


def quantization(define):
    define.bool('quantize', ExportConfig.quantize, 'Use the quantized model of a '
                'quantization-aware checkpoint (--quantize_delay in training): fake int8 '
                'quantization on the learned ranges to evaluate, the int8 TFLite on them '
                'to export. Such a checkpoint is detected without it; with it, a float '
                'checkpoint is an error.')


def batch_norm_statistics(define):
    define.integer('recompute_batch_norm_statistics', None, 'First recompute the '
                   'checkpoint\'s batch-norm moving statistics as the exact average over '
                   'this many batches of the training split (training preprocessing, '
                   '--batch_size each), written as a new checkpoint in '
                   '--batch_norm_statistics_dir; then use that. Unset: the checkpoint\'s.')
    define.string('batch_norm_statistics_dir', None, 'Where the checkpoint with recomputed '
                  'statistics goes; default: batch_norm_statistics/ beside the checkpoint.')
