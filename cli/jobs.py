"""The three jobs the scripts run: train, evaluate, export. Each takes frozen configs
and assembles the dataset, preprocessing, network and loop from their factories."""
import dataclasses
from typing import Optional

from absl import logging
import tensorflow as tf

from cli import run_record
from core import checks, paths, seeding
from core.errors import DataError, UsageError
from datasets import dataset_factory, dataset_utils, input_pipeline
from deployment import model_deploy
from deployment import plan as deployment_plan
from export import exporter, parity, pipeline
from nets import nets_factory, quantization
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

    def __post_init__(self):
        checks.check_at_least(1, batch_size=self.batch_size,
                              shuffle_buffer_size=self.shuffle_buffer_size)
        checks.check_at_least(1, unset='the network\'s default', image_size=self.image_size)
        checks.check_at_least(1, unset='AUTOTUNE', num_readers=self.num_readers,
                              num_preprocessing_threads=self.num_preprocessing_threads)
        checks.check_at_least(0, labels_offset=self.labels_offset)
        if self.dataset_dir and not self.dataset_name.startswith(
                dataset_factory.TFDS_PREFIX):
            paths.check_input_dir(self.dataset_dir, '--dataset_dir',
                                  'convert the data first with download_and_convert_data.py '
                                  'or pass the directory holding its TFRecords')


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
    num_classes = _num_classes(spec.num_classes, data.labels_offset)
    try:
        config = input_pipeline.InputConfig(
            batch_size=data.batch_size, image_size=image_size, is_training=is_training,
            labels_offset=data.labels_offset, num_readers=data.num_readers,
            num_preprocessing_threads=data.num_preprocessing_threads, seed=data.seed,
            shuffle_buffer_size=data.shuffle_buffer_size,
            deterministic=data.deterministic, cache=data.cache, report_skipped=True,
            num_classes=num_classes,
            decode_in_preprocessing=inception_training, use_bboxes=inception_training)
    except ValueError as error:
        raise UsageError(str(error)) from None
    input_fn = input_pipeline.make_input_fn(spec, preprocess, config)
    channels = _image_channels(spec.image_shape[-1], data.use_grayscale)
    return _Assembly(spec, num_classes, (image_size, image_size, channels), input_fn)


def _describe_schedule(schedule: learning_rate.LearningRateSchedule,
                       batch_size: int) -> str:
    """The resolved schedule in steps, e.g. '0.1, cosine to 0.0001 over 900 steps after
    100 warmup steps; 50 steps per epoch (batch 32 per replica)'."""
    config = schedule.config
    decay_type = config.learning_rate_decay_type
    text = f'{config.learning_rate:g}, {decay_type}'
    if decay_type in ('cosine', 'polynomial'):
        text += f' to {config.end_learning_rate:g} over {schedule.decay_steps} steps'
    elif decay_type != 'fixed':
        text += f' decay every {schedule.decay_steps} steps'
    if schedule.warmup_steps:
        text += f' after {schedule.warmup_steps:g} warmup steps'
    # Slim counted epochs in per-replica batches; say so, since it sets the step counts.
    return text + (f'; {schedule.steps_per_epoch:g} steps per epoch (batch {batch_size} '
                   'per replica)')


def train(data: DataConfig, deployment: model_deploy.DeploymentConfig,
          config: train_loop.TrainConfig, optimizer_config: optimizers.OptimizerConfig,
          learning_rate_config: learning_rate.LearningRateConfig, weight_decay: float,
          quantize_delay: Optional[int] = None):
    """Trains data.model_name on data; returns the Trainer. With quantize_delay (a
    step; negative, as slim's -1, or None: off), quantization-aware from that step.

    The Trainer holds the input iterator; a script keeps it until it exits (see
    cli.guard.guarded) because destroying that iterator can stall.
    """
    checks.check_at_least(0, weight_decay=weight_decay)
    if deployment.serves_only:  # a ps task, or a worker the chief schedules steps on
        model_deploy.serve(deployment)
        return None
    # First: clones on CPU need the device split before TensorFlow starts.
    plan = deployment_plan.create(deployment)
    strategy = plan.strategy
    if data.seed is not None:  # seeds weights, dropout and augmentation, not only data
        seeding.seed_everything(data.seed)
    assembly = _assemble_data(data, is_training=True)
    learning_rate_fn = learning_rate.create_learning_rate_fn(
        learning_rate_config, assembly.spec.num_samples, data.batch_size,
        batches_per_update=deployment.gradients_per_update,
        max_number_of_steps=config.max_number_of_steps)
    with strategy.scope():
        network = nets_factory.get_network_fn(data.model_name, assembly.num_classes,
                                              weight_decay=weight_decay, is_training=True)
        if quantize_delay is not None and quantize_delay >= 0:
            quantization.enable(network, quantization.QuantizationParams(quantize_delay))
            logging.info('Quantization-aware training: fake quantization from step %d.',
                         quantize_delay)
        optimizer = optimizers.create_optimizer(optimizer_config)
    logging.info('Training %s on %s/%s (%d examples, %d classes) with %d replica(s).',
                 data.model_name, data.dataset_name, data.dataset_split_name,
                 assembly.spec.num_samples, assembly.num_classes,
                 strategy.num_replicas_in_sync)
    trainer = train_loop.Trainer(
        plan=plan, network=network, optimizer=optimizer,
        learning_rate_fn=learning_rate_fn, input_fn=assembly.input_fn,
        image_shape=assembly.image_shape, config=config)
    if plan.is_chief:
        logging.info('%s', plan.describe(
            batch_size=data.batch_size, train_dir=config.train_dir,
            extra=[f'learning rate: {_describe_schedule(learning_rate_fn, data.batch_size)}',
                   'variables:    ' + ', '.join(
                       f'{count} on {device or "this process"}' for device, count in
                       model_deploy.variable_placement(network.variables).items())]))
    try:
        trainer.train()
    except tf.errors.InvalidArgumentError as error:
        message = input_pipeline.data_error_message(error)
        if message is None:
            raise
        trainer.save_now()  # the steps before the bad record are kept
        raise DataError(message) from None
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


def _class_names(data: DataConfig, num_classes: int) -> list:
    """The model's class names: labels.txt in --dataset_dir, else the dataset's own,
    shifted by --labels_offset; a class without a name is its number."""
    names = (dataset_utils.read_label_file(data.dataset_dir)
             if data.dataset_dir and dataset_utils.has_labels(data.dataset_dir)
             else dataset_factory.get_info(data.dataset_name, data.dataset_dir)
             .labels_to_names())
    return [names.get(i + data.labels_offset, str(i)) for i in range(num_classes)]


def evaluate(data: DataConfig, checkpoint_path: str, eval_dir: str,
             max_num_batches: Optional[int] = None, use_moving_averages: bool = False, *,
             top_k=eval_loop.DEFAULT_TOP_K, watch: Optional[eval_loop.WatchConfig] = None,
             deployment: Optional[model_deploy.DeploymentConfig] = None,
             quantize: bool = False):
    """Exact passes over the split: of one checkpoint, or with `watch` of each new
    checkpoint of the train_dir checkpoint_path until the training's last (see
    eval_loop.watch_checkpoints). Prints and writes Accuracy, the top_k recalls,
    per-class accuracy and the confusion matrix; records the best checkpoint. Weights
    are the raw ones, or their moving averages with use_moving_averages. With
    deployment, evaluates over its clones, data.batch_size examples each. Returns the
    last metrics. A quantization-aware checkpoint (or quantize, slim's --quantize) is
    evaluated with fake quantization on, as its int8 export computes."""
    if not checkpoint_path:
        raise UsageError('No checkpoint given; pass --checkpoint_path=<train_dir or '
                         'checkpoint prefix>.')
    checks.check_at_least(1, unset='the whole split', max_num_batches=max_num_batches)
    paths.check_output_dir(eval_dir, '--eval_dir')
    if watch is not None:
        eval_loop.check_train_dir(checkpoint_path)
    # First: clones on CPU need the device split before TensorFlow starts.
    strategy = model_deploy.create_strategy(deployment or model_deploy.from_flags())
    batch_size = data.batch_size * strategy.num_replicas_in_sync
    assembly = _assemble_data(dataclasses.replace(data, batch_size=batch_size),
                              is_training=False)
    with strategy.scope():
        network = nets_factory.get_network_fn(data.model_name, assembly.num_classes)
        _quantize_if_trained_so(network, checkpoint_path, quantize)
        network.build(assembly.image_shape)
    evaluator = eval_loop.Evaluator(network, num_classes=assembly.num_classes,
                                    top_k=top_k, strategy=strategy)
    class_names = _class_names(data, assembly.num_classes)
    split_size = assembly.spec.num_samples

    def evaluate_checkpoint(checkpoint):
        with strategy.scope():
            global_step = checkpoints.restore_network(
                network, checkpoint, use_moving_averages=use_moving_averages)
        metrics = evaluator.evaluate(assembly.input_fn(None), batch_size=batch_size,
                                     num_examples=split_size,
                                     max_num_batches=max_num_batches)
        metrics['split_num_examples'] = split_size
        accounted = metrics['num_examples'] + metrics['num_unreadable']
        if max_num_batches is None and accounted != split_size:
            logging.warning('The split should hold %d examples; %d were read and %d could '
                            'not be decoded (a damaged shard ends at the damage).',
                            split_size, metrics['num_examples'], metrics['num_unreadable'])
        record = eval_loop.EvaluationRecord(
            checkpoint=checkpoint, global_step=global_step, model_name=data.model_name,
            dataset_name=data.dataset_name, split_name=data.dataset_split_name)
        eval_loop.report(metrics, eval_dir, record, class_names)
        # Following a training, keep the best: the training deletes old checkpoints.
        eval_loop.update_best(eval_dir, metrics, record, keep_copy=watch is not None)
        return metrics

    if watch is None:
        return evaluate_checkpoint(checkpoints.resolve_checkpoint(checkpoint_path))
    same_evaluation = lambda entry: (  # noqa: E731
        (entry.get('model_name'), entry.get('dataset_name'), entry.get('split_name'))
        == (data.model_name, data.dataset_name, data.dataset_split_name))
    done = eval_loop.evaluated_checkpoints(eval_dir, same_evaluation)
    metrics = {}
    for _, checkpoint in eval_loop.watch_checkpoints(
            checkpoint_path, watch, skip=done.__contains__,
            final_step=lambda: run_record.recorded_max_steps(checkpoint_path)):
        metrics = evaluate_checkpoint(checkpoint)
    return metrics


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
    include_preprocessing: bool = False  # the 'serving_bytes' signature
    parity_split_name: str = 'validation'
    num_parity_examples: int = 64
    calibration_split_name: str = 'train'
    num_calibration_examples: int = 100
    quantize: bool = False

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


def _quantize_if_trained_so(network, checkpoint_path: Optional[str], quantize: bool):
    """Gives an evaluated or exported network fake quantization when its checkpoint is
    quantization-aware (holds activation ranges), as int8 kernels will compute it.

    quantize (slim's --quantize) insists: a float checkpoint is then an error. A train
    dir still without checkpoints (continuous evaluation) is judged by its flags.txt.
    """
    checkpoint = None
    # A prefix, or a directory with checkpoints (not one the training has yet to make).
    if checkpoint_path and (tf.io.gfile.exists(checkpoint_path + '.index')
                            or tf.train.latest_checkpoint(checkpoint_path)):
        checkpoint = checkpoints.resolve_checkpoint(checkpoint_path)
    aware = (quantization.is_quantization_aware(checkpoint) if checkpoint is not None
             else bool(checkpoint_path) and _trains_quantization_aware(checkpoint_path))
    if quantize and checkpoint is not None and not aware:
        raise UsageError(f'--quantize: checkpoint {checkpoint} holds no quantization '
                         f'ranges (it was not trained with --quantize_delay); drop '
                         f'--quantize, or train with --quantize_delay first.')
    if aware or quantize:
        quantization.enable(network, quantization.QuantizationParams())
        logging.info('Quantization-aware checkpoint: fake quantization on (as int8).')


def export(config: ExportConfig, request: pipeline.ExportRequest):
    """Writes every format of request for a (trained) network, each checked against the
    network in process first; returns the parity results."""
    if config.quantize and not config.checkpoint_path:
        raise UsageError('--quantize exports a quantization-aware checkpoint; pass its '
                         '--checkpoint_path (a run trained with --quantize_delay).')
    info = dataset_factory.get_info(config.dataset_name, config.dataset_dir)
    network_spec = nets_factory.get_spec(config.model_name)
    num_classes = _num_classes(info.num_classes, config.labels_offset)
    channels = _image_channels(info.image_shape[-1], config.use_grayscale)
    input_shape = _export_input_shape(config, network_spec, channels)
    is_video = len(input_shape) == 4
    if is_video and config.include_preprocessing:
        raise UsageError('--include_preprocessing decodes images; video nets take '
                         'preprocessed clips only: drop it.')
    network = nets_factory.get_network_fn(config.model_name, num_classes)
    _quantize_if_trained_so(network, config.checkpoint_path, config.quantize)
    network.build(input_shape)
    if config.checkpoint_path:
        checkpoints.restore_network(network, config.checkpoint_path,
                                    use_moving_averages=config.use_moving_averages)
    else:
        logging.warning('No --checkpoint_path: exporting freshly initialised weights.')
    preprocess = None
    if not is_video:
        preprocess_image = preprocessing_factory.get_preprocessing(
            _preprocessing_family(config.preprocessing_name, network_spec),
            use_grayscale=config.use_grayscale)
        preprocess = lambda image: preprocess_image(image, *input_shape[:2])  # noqa: E731
    class_names = (dataset_utils.read_label_file(config.dataset_dir)
                   if config.dataset_dir and dataset_utils.has_labels(config.dataset_dir)
                   else info.labels_to_names())
    serving = exporter.ServingInfo(
        input_shape=input_shape, labels_offset=config.labels_offset,
        class_names=class_names, decode_channels=info.image_shape[-1],
        preprocess=preprocess if config.include_preprocessing else None)

    def examples(split_name, count):
        spec = (dataset_factory.get_dataset(config.dataset_name, split_name,
                                            config.dataset_dir)
                if config.dataset_dir and not is_video else None)
        synthetic_shape = info.image_shape if None not in info.image_shape else None
        return parity.load_examples(count, input_shape, preprocess=preprocess,
                                    decode_channels=info.image_shape[-1], spec=spec,
                                    synthetic_image_shape=synthetic_shape)

    return pipeline.export(
        network, serving, request,
        examples(config.parity_split_name, config.num_parity_examples),
        calibration=lambda: examples(config.calibration_split_name,
                                     config.num_calibration_examples).images)
