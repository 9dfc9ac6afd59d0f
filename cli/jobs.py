"""The three jobs the scripts run: train, evaluate, export. Each takes frozen configs
and assembles the dataset, preprocessing, network and loop from their factories."""
import dataclasses
from typing import Optional

from absl import logging

from core import seeding
from core.errors import UsageError
from datasets import dataset_factory, input_pipeline
from deployment import model_deploy
from export import exporter
from nets import nets_factory
from preprocessing import preprocessing_factory
from training import checkpoints, eval_loop, learning_rate, optimizers, train_loop


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Which data a job reads, how it is preprocessed, and for which model."""
    dataset_name: str
    dataset_split_name: str
    dataset_dir: Optional[str]
    model_name: str
    batch_size: int
    file_pattern: Optional[str] = None
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


@dataclasses.dataclass(frozen=True)
class _Assembly:
    spec: dataset_factory.DatasetSpec
    num_classes: int
    image_shape: tuple
    input_fn: object


def _num_classes(dataset_classes: int, labels_offset: int) -> int:
    num_classes = dataset_classes - labels_offset
    if num_classes < 1:
        raise UsageError(f'--labels_offset={labels_offset} leaves no classes of the '
                         f'dataset\'s {dataset_classes}; lower it.')
    return num_classes


def _image_channels(dataset_channels: int, use_grayscale: bool) -> int:
    return 1 if use_grayscale else dataset_channels


def _preprocessing_family(preprocessing_name: Optional[str], network_spec) -> str:
    """--preprocessing_name as a family; a model name (as slim accepted) means its family."""
    if not preprocessing_name:
        return network_spec.preprocessing_name
    if (not preprocessing_factory.is_available(preprocessing_name)
            and preprocessing_name in nets_factory.network_names()):
        return nets_factory.get_spec(preprocessing_name).preprocessing_name
    return preprocessing_name


def _assemble_data(data: DataConfig, is_training: bool) -> _Assembly:
    spec = dataset_factory.get_dataset(data.dataset_name, data.dataset_split_name,
                                       data.dataset_dir, data.file_pattern)
    network_spec = nets_factory.get_spec(data.model_name)
    family = _preprocessing_family(data.preprocessing_name, network_spec)
    preprocess = preprocessing_factory.get_preprocessing(
        family, is_training=is_training, use_grayscale=data.use_grayscale)
    image_size = data.image_size or network_spec.default_image_size
    # Inception training crops while decoding, guided by the record's boxes.
    inception_training = is_training and family == 'inception'
    try:
        config = input_pipeline.InputConfig(
            batch_size=data.batch_size, image_size=image_size, is_training=is_training,
            labels_offset=data.labels_offset, num_readers=data.num_readers,
            num_preprocessing_threads=data.num_preprocessing_threads, seed=data.seed,
            shuffle_buffer_size=data.shuffle_buffer_size,
            deterministic=data.deterministic, cache=data.cache, report_skipped=True,
            decode_in_preprocessing=inception_training, use_bboxes=inception_training)
    except ValueError as error:
        raise UsageError(str(error)) from None
    input_fn = input_pipeline.make_input_fn(spec, preprocess, config)
    channels = _image_channels(spec.image_shape[-1], data.use_grayscale)
    return _Assembly(spec, _num_classes(spec.num_classes, data.labels_offset),
                     (image_size, image_size, channels), input_fn)


def train(data: DataConfig, deployment: model_deploy.DeploymentConfig,
          config: train_loop.TrainConfig, optimizer_config: optimizers.OptimizerConfig,
          learning_rate_config: learning_rate.LearningRateConfig, weight_decay: float):
    """Trains data.model_name on data; returns the Trainer.

    The Trainer holds the input iterator; a script keeps it until it exits (see
    cli.guard.guarded) because destroying that iterator can stall.
    """
    # First: clones on CPU need the device split before TensorFlow starts.
    strategy = model_deploy.create_strategy(deployment)
    if data.seed is not None:  # seeds weights, dropout and augmentation, not only data
        seeding.seed_everything(data.seed)
    assembly = _assemble_data(data, is_training=True)
    learning_rate_fn = learning_rate.create_learning_rate_fn(
        learning_rate_config, assembly.spec.num_samples, data.batch_size,
        replicas_to_aggregate=deployment.gradients_per_update)
    with strategy.scope():
        network = nets_factory.get_network_fn(data.model_name, assembly.num_classes,
                                              weight_decay=weight_decay, is_training=True)
        optimizer = optimizers.create_optimizer(optimizer_config)
    logging.info('Training %s on %s/%s (%d examples, %d classes) with %d replica(s).',
                 data.model_name, data.dataset_name, data.dataset_split_name,
                 assembly.spec.num_samples, assembly.num_classes,
                 strategy.num_replicas_in_sync)
    trainer = train_loop.Trainer(
        strategy=strategy, network=network, optimizer=optimizer,
        learning_rate_fn=learning_rate_fn, input_fn=assembly.input_fn,
        image_shape=assembly.image_shape, config=config, is_chief=deployment.is_chief,
        sync_replicas=deployment.sync_replicas)
    trainer.train()
    return trainer


def dry_run_restore(data: DataConfig, config: train_loop.TrainConfig):
    """Prints what training would restore from config.checkpoint_path; trains nothing.

    Ends with the error training would give, if the restore cannot be done.
    """
    if not config.checkpoint_path:
        raise UsageError('--dry_run_restore needs --checkpoint_path, the checkpoint to '
                         'inspect.')
    assembly = _assemble_data(data, is_training=True)
    network = nets_factory.get_network_fn(data.model_name, assembly.num_classes,
                                          is_training=True)
    network.build(assembly.image_shape)
    plan = checkpoints.plan_restore(network, config.checkpoint_path,
                                    exclude_scopes=config.checkpoint_exclude_scopes)
    print(plan.describe(verbose=True), flush=True)
    plan.check(config.ignore_missing_vars, fine_tuning=True)
    return plan


def evaluate(data: DataConfig, checkpoint_path: str, eval_dir: str,
             max_num_batches: Optional[int] = None, use_moving_averages: bool = False):
    """One exact pass over the split; prints and writes Accuracy and Recall_5."""
    if not checkpoint_path:
        raise UsageError('No checkpoint given; pass --checkpoint_path=<train_dir or '
                         'checkpoint prefix>.')
    assembly = _assemble_data(data, is_training=False)
    network = nets_factory.get_network_fn(data.model_name, assembly.num_classes)
    network.build(assembly.image_shape)
    checkpoint = checkpoints.resolve_checkpoint(checkpoint_path)
    global_step = checkpoints.restore_network(network, checkpoint,
                                              use_moving_averages=use_moving_averages)
    metrics = eval_loop.evaluate(network, assembly.input_fn(None),
                                 num_examples=assembly.spec.num_samples,
                                 max_num_batches=max_num_batches)
    accounted = metrics['num_examples'] + metrics['num_unreadable']
    if max_num_batches is None and accounted != assembly.spec.num_samples:
        logging.warning('The split should hold %d examples; %d were read and %d could not '
                        'be decoded (a damaged shard ends at the damage).',
                        assembly.spec.num_samples, metrics['num_examples'],
                        metrics['num_unreadable'])
    eval_loop.report(metrics, eval_dir, eval_loop.EvaluationRecord(
        checkpoint=checkpoint, global_step=global_step, model_name=data.model_name,
        dataset_name=data.dataset_name, split_name=data.dataset_split_name))
    return metrics


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    model_name: str
    dataset_name: str
    checkpoint_path: Optional[str] = None
    saved_model_dir: Optional[str] = None
    output_file: Optional[str] = None
    image_size: Optional[int] = None
    batch_size: Optional[int] = None
    labels_offset: int = 0
    use_grayscale: bool = False
    use_moving_averages: bool = False

    def __post_init__(self):
        if not (self.saved_model_dir or self.output_file):
            raise UsageError('Nothing to export; pass --saved_model_dir and/or '
                             '--output_file.')


def export(config: ExportConfig):
    """Writes the SavedModel and/or the frozen GraphDef of a (trained) network."""
    info = dataset_factory.get_info(config.dataset_name)
    network_spec = nets_factory.get_spec(config.model_name)
    num_classes = _num_classes(info.num_classes, config.labels_offset)
    image_size = config.image_size or network_spec.default_image_size
    channels = _image_channels(info.image_shape[-1], config.use_grayscale)
    network = nets_factory.get_network_fn(config.model_name, num_classes)
    network.build((image_size, image_size, channels))
    if config.checkpoint_path:
        checkpoints.restore_network(network, config.checkpoint_path,
                                    use_moving_averages=config.use_moving_averages)
    else:
        logging.warning('No --checkpoint_path: exporting freshly initialised weights.')
    if config.saved_model_dir:
        exporter.export_saved_model(network, config.saved_model_dir, image_size=image_size,
                                    channels=channels, labels_offset=config.labels_offset)
        logging.info('Wrote SavedModel to %s.', config.saved_model_dir)
    if config.output_file:
        graph_def = exporter.frozen_graph_def(
            network, image_size=image_size, batch_size=config.batch_size,
            channels=channels, labels_offset=config.labels_offset)
        exporter.write_graph_def(graph_def, config.output_file)
        logging.info('Wrote GraphDef to %s.', config.output_file)
