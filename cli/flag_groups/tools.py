"""Flag groups of the toolkit's other scripts: Prediction, Existing output, Checkpoint
averaging, Checkpoint output, Keras weights; and Logging, which every script takes."""
from absl import flags

from cli import startup
from cli.averaging_job import AveragingJob
from cli.predict_job import PredictionJob
from export.pipeline import ExportRequest

# The flags belong to the script calling cli.flags.define(): absl files them under it, so
# its --helpfull and its flags.txt (cli.run_record) list them.
flags.disclaim_key_flags()


def prediction(define):
    define.list('image_files', None, 'Images to classify, comma-separated: files (JPEG, '
                'PNG, GIF, BMP, WebP), folders (every file inside, sub-folders included, '
                'in sorted order) and glob patterns such as \'photos/*.jpg\' (quoted: the '
                'script expands them, ** included). A file that cannot be read is skipped '
                'with a warning. Default: --num_examples examples of the dataset split.')
    define.integer('num_examples', PredictionJob.num_examples, 'Without --image_files: how '
                   'many examples of --dataset_dir\'s split to predict, each against its '
                   'label.')


def existing_output(define):
    define.bool('overwrite', ExportRequest.overwrite, 'Replace existing exports (and a '
                'labels.txt naming other classes), an averaged checkpoint of the same '
                'step, or an imported one in a non-empty --output_dir; convert an '
                'image_folder whose source changed again.')


def checkpoint_averaging(define):
    define.string('checkpoint_dir', None, 'A training\'s --train_dir: its newest '
                  '--num_checkpoints intact checkpoints are averaged.')
    define.list('checkpoint_prefixes', None, 'Instead of --checkpoint_dir, the checkpoints '
                'to average, comma-separated (e.g. /tmp/train/model.ckpt-600,'
                '/tmp/train/model.ckpt-800); checkpoints of one network.')
    define.integer('num_checkpoints', AveragingJob.num_checkpoints, 'How many of '
                   '--checkpoint_dir\'s newest checkpoints to average (at least 2).')


def checkpoint_output(define):
    define.string('output_dir', None, 'Where the new checkpoint goes, with its own '
                  '`checkpoint` file (averaged: model.ckpt-<newest step>; imported from '
                  'Keras: model.ckpt-0): pass this directory as --checkpoint_path to '
                  'training (fine-tuning), evaluation and export.')


def keras_weights(define):
    define.string('keras_weights', None, 'The Keras application\'s weights for '
                  '--model_name: a .h5 or .weights.h5 file of that application (all of it '
                  'is loaded), or imagenet for Keras\'s ImageNet weights (downloaded into '
                  'Keras\'s cache, ~/.keras/models, unless already there).')


def timm_weights(define):
    define.string('timm_weights', None, 'timm\'s weights for --model_name: a '
                  'model.safetensors file (with timm\'s config.json beside it, if any), '
                  'a Hugging Face snapshot folder holding both, or hf_hub:<id> (e.g. '
                  'hf_hub:timm/vit_base_patch16_224.augreg2_in21k_ft_in1k, downloaded '
                  'through huggingface_hub).')


def tf_logging(define):
    """Read before TensorFlow loads (cli.startup); defined here for --help and parsing."""
    define.enum('tf_log_level', startup.DEFAULT_TF_LOG_LEVEL, startup.TF_LOG_LEVELS,
                'TensorFlow\'s own log output: info, warning, error or none (default: '
                'none; a failure that stops the script is its one ERROR: line, and error '
                'shows TensorFlow\'s error lines too, e.g. a cluster peer\'s failures).')
