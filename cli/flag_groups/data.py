"""Flag groups of the data: Dataset, Split, Input pipeline, tf.data service, and the
Conversion of download_and_convert_data.py."""
from absl import flags

from cli.assembly import DataConfig
from datasets import dataset_factory
from datasets.dataset_utils import ConvertOptions

# The flags belong to the script calling cli.flags.define(): absl files them under it, so
# its --helpfull and its flags.txt (cli.run_record) list them.
flags.disclaim_key_flags()

# --dataset_name left unset: cli.configs resolves it to this.
DEFAULT_DATASET = 'imagenet'


def dataset(define):
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


def split(define):
    define.string('dataset_split_name', None, 'The split to read; default: train to train, '
                  'test to evaluate and to predict.')


def input_pipeline(define):
    define.string('file_pattern', None, 'Override of the dataset\'s file name pattern, '
                  'relative to --dataset_dir, with %s for the split.')
    define.integer('batch_size', None, 'Examples per batch on each clone (as TF-Slim); '
                   'default: 32 to train, 100 to evaluate.')
    define.integer('num_readers', None, 'TFRecord files read in parallel; default: tuned '
                   'by tf.data (AUTOTUNE).')
    define.integer('num_preprocessing_threads', None, 'Images decoded and preprocessed in '
                   'parallel; default: tuned by tf.data (AUTOTUNE).')
    define.integer('shuffle_buffer_size', DataConfig.shuffle_buffer_size, 'Training '
                   'records shuffled at once (after the shard order is shuffled).')
    define.bool('deterministic', DataConfig.deterministic, 'Read training data in a '
                'reproducible order (with --seed); slower.')
    define.bool('cache', DataConfig.cache, 'Keep the split\'s records in memory after the '
                'first pass (small datasets).')


def data_service(define):
    """Input across training workers on TensorFlow's tf.data service."""
    define.string('data_service_address', None, 'grpc://host:port of a tf.data service '
                  'dispatcher. Training: the input pipeline (reading, decoding, '
                  'preprocessing, batching) runs on the service\'s data workers, files '
                  'handed out dynamically so that across all training workers each example '
                  'is read once per epoch. With --job_name=data_dispatcher: serve the '
                  'dispatcher on its port; with --job_name=data_worker: serve a data '
                  'worker for it. Unset: every training worker reads the files itself.')
    define.string('data_worker_address', None, 'With --job_name=data_worker: host:port '
                  'this data worker serves on, the host being the name training workers '
                  'reach it at.')
    define.string('data_service_work_dir', None, 'With --job_name=data_dispatcher '
                  '(required): a directory of the dispatcher\'s own (local, shared or '
                  'gs://) where it journals its datasets and jobs before answering; '
                  'restarted on the same port and directory, it resumes them and training '
                  'goes on.')
    define.float('wait_for_data_service_secs', DataConfig.wait_for_data_service_secs, 'How '
                 'long training workers and data workers wait for the dispatcher to answer '
                 '(at start, or while it is restarted), and training workers for a data '
                 'worker to serve, then stop with an error.')


def conversion(define):
    define.bool('keep_archives', ConvertOptions.keep_archives, 'Keep the downloaded '
                'archives after conversion (TF-Slim deleted them). Kept archives are '
                'verified and reused, not downloaded again, when the conversion is re-run.')
    define.string('source_dir', None, 'Data you provide. image_folder: a directory with '
                  'one sub-directory of images per class, or train/, val/, test/ holding '
                  'such class directories. imagenet: a directory holding '
                  'ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar, or train/ (one '
                  'directory per synset) and val/ extracted from them. visualwakewords: a '
                  'COCO 2014 directory with train2014/, val2014/ and '
                  'annotations/instances_{train,val}2014.json.')
    define.float('validation_percentage', ConvertOptions.validation_percentage,
                 'image_folder: percentage of each class held out for the validation split '
                 '(seeded, stratified); not for a source split already.')
    define.integer('train_shards', None, 'Shards of the train split; default: the '
                   'dataset\'s (imagenet 1024, visualwakewords 100, image_folder one per '
                   '1,000 images).')
    define.integer('validation_shards', None, 'Shards of the validation split; default: '
                   'the dataset\'s (imagenet 128, visualwakewords 10).')
    define.string('bounding_boxes', None, 'imagenet: the bounding-box annotations, '
                  'ILSVRC2012_bbox_train_v2.tar.gz or its extracted directory of XML files '
                  '(optional).')
    define.float('small_object_area_threshold', ConvertOptions.small_object_area_threshold,
                 'visualwakewords: objects smaller than this fraction of the image do not '
                 'count.')
    define.string('foreground_class_of_interest',
                  ConvertOptions.foreground_class_of_interest, 'visualwakewords: the COCO '
                  'category that makes label 1.')
    define.integer('num_workers', None, 'Images encoded in parallel; default: one per '
                   'core.')
