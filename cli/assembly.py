"""What the jobs share: a DataConfig's dataset, preprocessing and input pipeline
assembled from their factories, and the quantization a checkpoint asks for."""
import dataclasses
import functools
from typing import Optional

from absl import logging
import tensorflow as tf

from cli import run_record
from core import checks, paths
from core.errors import UsageError
from datasets import data_service, dataset_factory, input_pipeline
from nets import nets_factory, quantization
from preprocessing import augment_policies, preprocessing_factory
from training.benchmark import throughput
from training.checkpoints import integrity


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Which data a job reads, how it is preprocessed, and for which model."""
    dataset_name: str
    dataset_split_name: str
    dataset_dir: Optional[str]
    model_name: str
    batch_size: int
    file_pattern: Optional[str] = None
    batch_norm_decay: Optional[float] = None  # None: the family's
    batch_norm_epsilon: Optional[float] = None
    preprocessing_name: Optional[str] = None
    image_size: Optional[int] = None
    labels_offset: int = 0
    use_grayscale: bool = False
    num_readers: Optional[int] = None  # None: AUTOTUNE
    num_preprocessing_threads: Optional[int] = None
    seed: Optional[int] = None
    shuffle_buffer_size: int = 2048
    deterministic: bool = False
    cache: bool = False
    # Training only: evaluation and export never augment.
    augmentation: augment_policies.AugmentationConfig = augment_policies.AugmentationConfig()
    # Training only: read through the tf.data service's dispatcher at grpc://host:port.
    data_service_address: Optional[str] = None
    wait_for_data_service_secs: float = 60.0
    # Keyword arguments of the family's preprocessing, e.g. an imported checkpoint's
    # pretrained_cfg (cli/imported_preprocessing.py): ((name, value), ...).
    preprocessing_options: tuple = ()

    def __post_init__(self):
        checks.check_at_least(1, batch_size=self.batch_size,
                              shuffle_buffer_size=self.shuffle_buffer_size)
        checks.check_at_least(1, unset='the network\'s default', image_size=self.image_size)
        checks.check_at_least(1, unset='AUTOTUNE', num_readers=self.num_readers,
                              num_preprocessing_threads=self.num_preprocessing_threads)
        checks.check_at_least(0, labels_offset=self.labels_offset)
        if self.data_service_address:  # a malformed address fails before any server starts
            data_service.parse_address(self.data_service_address)
        if self.dataset_dir and not self.dataset_name.startswith(
                dataset_factory.TFDS_PREFIX):
            paths.check_input_dir(self.dataset_dir, '--dataset_dir',
                                  'convert the data first with download_and_convert_data.py '
                                  'or pass the directory holding its TFRecords')


@dataclasses.dataclass(frozen=True)
class Assembly:
    spec: dataset_factory.DatasetSpec
    num_classes: int
    image_shape: tuple
    input_fn: object
    input_source: Optional[str] = None  # for the deployment plan; None: its default


def classes_after_offset(dataset_classes: int, labels_offset: int) -> int:
    num_classes = dataset_classes - labels_offset
    if num_classes < 1:
        raise UsageError(f'--labels_offset={labels_offset} leaves no classes of the '
                         f'dataset\'s {dataset_classes}; lower it.')
    return num_classes


def image_channels(dataset_channels: int, use_grayscale: bool) -> int:
    return 1 if use_grayscale else dataset_channels


def preprocessing_family(preprocessing_name: Optional[str], network_spec) -> str:
    """--preprocessing_name as a family; a model name (as slim accepted) means its family."""
    if not preprocessing_name:
        return network_spec.preprocessing_name
    if (not preprocessing_factory.is_available(preprocessing_name)
            and preprocessing_name in nets_factory.network_names()):
        return nets_factory.get_spec(preprocessing_name).preprocessing_name
    return preprocessing_name


def assemble_data(data: DataConfig, is_training: bool,
                  data_service_run: Optional[str] = None) -> Assembly:
    """data_service_run: with --data_service_address, the name every training worker
    of this run shares (so they read one job of the tf.data service)."""
    spec = dataset_factory.get_dataset(data.dataset_name, data.dataset_split_name,
                                       data.dataset_dir, data.file_pattern)
    network_spec = nets_factory.get_spec(data.model_name)
    family = preprocessing_family(data.preprocessing_name, network_spec)
    preprocess = preprocessing_factory.get_preprocessing(
        family, is_training=is_training, use_grayscale=data.use_grayscale,
        augmentation=data.augmentation if is_training else None)
    if data.preprocessing_options:
        preprocess = functools.partial(preprocess, **dict(data.preprocessing_options))
    image_size = data.image_size or network_spec.default_image_size
    # Inception training crops while decoding, guided by the record's boxes.
    inception_training = is_training and family == 'inception'
    num_classes = classes_after_offset(spec.num_classes, data.labels_offset)
    service = (data_service.ServiceConfig(data.data_service_address, data_service_run,
                                          data.wait_for_data_service_secs)
               if is_training and data.data_service_address else None)
    try:
        config = input_pipeline.InputConfig(
            batch_size=data.batch_size, image_size=image_size, is_training=is_training,
            labels_offset=data.labels_offset, num_readers=data.num_readers,
            num_preprocessing_threads=data.num_preprocessing_threads, seed=data.seed,
            shuffle_buffer_size=data.shuffle_buffer_size,
            deterministic=data.deterministic, cache=data.cache, report_skipped=True,
            num_classes=num_classes,
            decode_in_preprocessing=inception_training, use_bboxes=inception_training,
            data_service=service)
    except ValueError as error:
        raise UsageError(str(error)) from None
    input_fn = input_pipeline.make_input_fn(spec, preprocess, config)
    channels = image_channels(spec.image_shape[-1], data.use_grayscale)
    return Assembly(spec, num_classes, (image_size, image_size, channels), input_fn,
                    input_source=service.describe() if service else None)


def assemble_synthetic_data(data: DataConfig) -> Assembly:
    """The dataset's facts (classes, channels, split size) without its files, and an
    input of random batches of the net's image size (--benchmark without
    --dataset_dir)."""
    info = dataset_factory.get_info(data.dataset_name, data.dataset_dir)
    if data.dataset_split_name not in info.splits_to_sizes:
        raise UsageError(f'Unknown split {data.dataset_split_name!r} for dataset '
                         f'{data.dataset_name}; use one of: '
                         f'{", ".join(info.splits_to_sizes)}.')
    num_classes = classes_after_offset(info.num_classes, data.labels_offset)
    image_size = data.image_size or nets_factory.get_spec(data.model_name).default_image_size
    image_shape = (image_size, image_size,
                   image_channels(info.image_shape[-1], data.use_grayscale))
    spec = dataset_factory.DatasetSpec(
        name=data.dataset_name, split_name=data.dataset_split_name, file_pattern='',
        num_samples=info.splits_to_sizes[data.dataset_split_name],
        num_classes=info.num_classes, labels_to_names=info.labels_to_names(),
        image_shape=tuple(info.image_shape), items_to_descriptions={}, dataset_dir='')
    return Assembly(spec, num_classes, image_shape, throughput.synthetic_input_fn(
        data.batch_size, image_shape, num_classes))


def _trains_quantization_aware(train_dir: str) -> bool:
    """Whether the run writing train_dir has --quantize_delay (0 or more) in its
    flags.txt."""
    path = f'{train_dir.rstrip("/")}/{run_record.FLAGS_FILE}'
    if not tf.io.gfile.exists(path):
        return False
    line = run_record.read_flags_file(path).get('quantize_delay', '')
    try:
        return int(line.split('=', 1)[1]) >= 0
    except (IndexError, ValueError):
        return False


def quantization_of(checkpoint_path: Optional[str],
                    quantize: bool) -> Optional[quantization.QuantizationParams]:
    """The fake quantization an evaluated or exported network is built with: on when its
    checkpoint is quantization-aware (holds activation ranges), as int8 kernels will
    compute it; None for a float checkpoint.

    quantize (slim's --quantize) insists: a float checkpoint is then an error. A train
    dir still without checkpoints (continuous evaluation) is judged by its flags.txt.
    """
    checkpoint, aware = None, None
    if checkpoint_path and tf.io.gfile.exists(checkpoint_path + '.index'):
        checkpoint = checkpoint_path
        with integrity.naming_damage(checkpoint):
            aware = quantization.is_quantization_aware(checkpoint)
    elif checkpoint_path and tf.io.gfile.isdir(checkpoint_path):
        # A directory's checkpoints are of one run: the newest readable one tells. Which
        # one is restored, and the warning if newer ones are damaged, come later.
        for _, prefix in reversed(integrity.candidates(checkpoint_path)):
            try:
                aware = quantization.is_quantization_aware(prefix)
            except integrity.READ_ERRORS:
                continue
            checkpoint = prefix
            break
    if aware is None:  # no checkpoint yet (continuous evaluation): the run's flags tell
        aware = bool(checkpoint_path) and _trains_quantization_aware(checkpoint_path)
    if quantize and checkpoint is not None and not aware:
        raise UsageError(f'--quantize: checkpoint {checkpoint} holds no quantization '
                         f'ranges (it was not trained with --quantize_delay); drop '
                         f'--quantize, or train with --quantize_delay first.')
    if not (aware or quantize):
        return None
    logging.info('Quantization-aware checkpoint: fake quantization on (as int8).')
    return quantization.QuantizationParams()
