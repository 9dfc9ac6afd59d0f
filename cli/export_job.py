"""The export job: a (trained) network written in each format asked for, each checked
against the network first."""
import dataclasses
import functools
from typing import Optional

from absl import logging
import tensorflow as tf

from cli import batch_norm_job, imported_preprocessing
from cli.assembly import DataConfig, classes_after_offset, image_channels
from cli.assembly import preprocessing_family
from cli.assembly import quantization_of
from core import checks, paths
from core.errors import UsageError
from datasets import dataset_factory, dataset_utils
from export import exporter, parity, pipeline
from nets import nets_factory
from preprocessing import preprocessing_factory
from training.checkpoints import restore


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    """Which model to export, from which weights, and the data its checks draw on.
    What to write and how it is judged is an export.pipeline.ExportRequest."""
    model_name: str
    dataset_name: str
    checkpoint_path: Optional[str] = None
    # Parity images, int8 calibration images and labels.txt; None: seeded synthetic
    # images and the dataset's built-in class names.
    dataset_dir: Optional[str] = None
    image_size: Optional[int] = None
    is_video_model: bool = False
    num_frames: Optional[int] = None  # video nets; default: the net's
    labels_offset: int = 0
    use_grayscale: bool = False
    use_moving_averages: bool = False
    preprocessing_name: Optional[str] = None
    # TF-Slim-era flag, accepted for older commands: every image SavedModel now has
    # the signatures that preprocess (uint8, encoded bytes, tf.Example).
    include_preprocessing: bool = False
    parity_split_name: str = 'validation'
    num_parity_examples: int = 64
    calibration_split_name: str = 'train'
    num_calibration_examples: int = 100
    quantize: bool = False
    batch_norm_decay: Optional[float] = None  # None: the family's
    batch_norm_epsilon: Optional[float] = None
    recompute: batch_norm_job.RecomputeConfig = batch_norm_job.RecomputeConfig()

    def __post_init__(self):
        checks.check_at_least(1, num_parity_examples=self.num_parity_examples,
                              num_calibration_examples=self.num_calibration_examples)
        checks.check_at_least(1, unset='the network\'s default', image_size=self.image_size,
                              num_frames=self.num_frames)
        checks.check_at_least(0, labels_offset=self.labels_offset)
        if self.dataset_dir:
            paths.check_input_dir(self.dataset_dir, '--dataset_dir',
                                  'pass the converted dataset, or drop --dataset_dir for '
                                  'synthetic parity images')


def _export_input_shape(config: ExportConfig, network_spec, channels: int) -> tuple:
    if (config.is_video_model or config.num_frames) and not network_spec.num_frames:
        raise UsageError(f'{config.model_name} takes images, not clips; drop '
                         f'--is_video_model and --num_frames.')
    size = config.image_size or network_spec.default_image_size
    frames = config.num_frames or network_spec.num_frames
    return (*((frames,) if frames else ()), size, size, channels)


def _recomputed_checkpoint(config: ExportConfig, is_video: bool) -> Optional[str]:
    """The checkpoint to export: with --recompute_batch_norm_statistics, a copy whose
    batch-norm statistics are recomputed on the training split (cli.batch_norm_job)."""
    num_batches = config.recompute.recompute_batch_norm_statistics
    if not num_batches:
        return config.checkpoint_path
    if not (config.checkpoint_path and config.dataset_dir) or is_video:
        raise UsageError('--recompute_batch_norm_statistics needs the --checkpoint_path and '
                         'the image dataset\'s --dataset_dir (its train split).')
    data = DataConfig(
        dataset_name=config.dataset_name, dataset_split_name=batch_norm_job.TRAIN_SPLIT,
        dataset_dir=config.dataset_dir, model_name=config.model_name,
        batch_size=batch_norm_job.EXPORT_BATCH_SIZE, preprocessing_name=config.preprocessing_name,
        image_size=config.image_size, labels_offset=config.labels_offset,
        use_grayscale=config.use_grayscale, batch_norm_epsilon=config.batch_norm_epsilon)
    return batch_norm_job.recompute_checkpoint(
        data, config.checkpoint_path, num_batches,
        output_dir=config.recompute.batch_norm_statistics_dir,
        strategy=tf.distribute.get_strategy(), use_moving_averages=config.use_moving_averages,
        quantization=quantization_of(config.checkpoint_path, config.quantize))


def export(config: ExportConfig, request: pipeline.ExportRequest):
    """Writes every format of request for a (trained) network, each checked against the
    network in process first; returns the parity results."""
    if config.quantize and not config.checkpoint_path:
        raise UsageError('--quantize exports a quantization-aware checkpoint; pass its '
                         '--checkpoint_path (a run trained with --quantize_delay).')
    untrained = [name for name in request.targets if name in pipeline.NEED_CHECKPOINT]
    if untrained and not config.checkpoint_path:
        raise UsageError(f'{" and ".join(untrained)} would hold freshly initialised '
                         f'weights: pass the --checkpoint_path to export, or write '
                         f'--export_format=graphdef (TF-Slim\'s inference graph, to '
                         f'freeze later with a checkpoint; docs/export.md).')
    info = dataset_factory.get_info(config.dataset_name, config.dataset_dir)
    class_names = (dataset_utils.read_label_file(config.dataset_dir)
                   if config.dataset_dir and dataset_utils.has_labels(config.dataset_dir)
                   else info.labels_to_names())
    # Before the network is built: a labels.txt in the way ends in one line at once.
    pipeline.check_labels_free(request.labels_dir, class_names, request.overwrite)
    network_spec = nets_factory.get_spec(config.model_name)
    num_classes = classes_after_offset(info.num_classes, config.labels_offset)
    channels = image_channels(info.image_shape[-1], config.use_grayscale)
    input_shape = _export_input_shape(config, network_spec, channels)
    is_video = len(input_shape) == 4
    if is_video and config.include_preprocessing:
        raise UsageError('--include_preprocessing decodes images; video nets take '
                         'preprocessed clips only: drop it.')
    checkpoint_path = _recomputed_checkpoint(config, is_video)
    network = nets_factory.get_network_fn(
        config.model_name, num_classes,
        quantization=quantization_of(checkpoint_path, config.quantize),
        batch_norm_decay=config.batch_norm_decay, batch_norm_epsilon=config.batch_norm_epsilon)
    network.build(input_shape)
    if checkpoint_path:
        checkpoint_path = restore.resolve_checkpoint(checkpoint_path)
        step = restore.restore_network(network, checkpoint_path,
                                           use_moving_averages=config.use_moving_averages)
        batch_norm_job.warn_if_immature(config.model_name, checkpoint_path, step)
    elif set(request.targets) != {'graphdef'}:  # the graph alone holds no weights
        logging.warning('No --checkpoint_path: exporting freshly initialised weights.')
    preprocess = None
    if not is_video:
        family = preprocessing_family(config.preprocessing_name, network_spec)
        preprocess_image = functools.partial(
            preprocessing_factory.get_preprocessing(family, use_grayscale=config.use_grayscale),
            **dict(imported_preprocessing.options(config.checkpoint_path, family,
                                                  named=bool(config.preprocessing_name))))
        preprocess = lambda image: preprocess_image(image, *input_shape[:2])  # noqa: E731
    serving = exporter.ServingInfo(
        input_shape=input_shape, labels_offset=config.labels_offset,
        class_names=class_names, decode_channels=info.image_shape[-1],
        preprocess=preprocess)

    def spec_of(split_name):
        return (dataset_factory.get_dataset(config.dataset_name, split_name,
                                            config.dataset_dir)
                if config.dataset_dir and not is_video else None)

    images = dict(input_shape=input_shape, preprocess=preprocess,
                  decode_channels=info.image_shape[-1],
                  synthetic_image_shape=(info.image_shape if None not in info.image_shape
                                         else None))
    parity_spec = spec_of(config.parity_split_name)

    def calibration():  # never the parity images (export.parity)
        examples = parity.load_calibration_examples(
            config.num_calibration_examples, spec=spec_of(config.calibration_split_name),
            parity_spec=parity_spec, num_parity_examples=config.num_parity_examples,
            **images)
        logging.info('Calibrating the int8 model on %s.', examples.source)
        return examples.images

    return pipeline.export(
        network, serving, request,
        parity.load_examples(config.num_parity_examples, spec=parity_spec, **images),
        calibration=calibration)


@dataclasses.dataclass(frozen=True)
class ExportJob:
    """Everything export_inference_graph.py's flags ask for."""
    config: ExportConfig
    request: pipeline.ExportRequest


def run(job: ExportJob):
    return export(job.config, job.request)
