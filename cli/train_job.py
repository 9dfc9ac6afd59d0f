"""The training job: train_image_classifier.py's flags, as configs, to a Trainer."""
import dataclasses
import os
from typing import Optional

from absl import logging
import tensorflow as tf

from cli import batch_norm_job, run_record
from cli.assembly import DataConfig
from cli.assembly import assemble_data as _assemble_data
from cli.assembly import assemble_synthetic_data
from core import checks, paths, seeding, threads
from core.errors import DataError, UsageError
from core.threads import ThreadConfig
from datasets import input_pipeline
from deployment import model_deploy
from deployment import plan as deployment_plan
from nets import nets_factory, quantization
from training.benchmark import throughput as benchmark_lib
from training.checkpoints import restore as restore_lib
from training.recipes import gradient_accumulation
from training.recipes import learning_rate
from training.recipes import optimizers
from training.checkpoints import lock as lock_lib
from training.loop import trainer as trainer_lib
from training.benchmark.report import Setting


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
          config: trainer_lib.TrainConfig, optimizer_config: optimizers.OptimizerConfig,
          learning_rate_config: learning_rate.LearningRateConfig, weight_decay: float,
          quantize_delay: Optional[int] = None, drop_path_rate: float = 0.0,
          benchmark: Optional[benchmark_lib.BenchmarkConfig] = None):
    """Trains data.model_name on data; returns the Trainer. With quantize_delay (a
    step; negative, as slim's -1, or None: off), quantization-aware from that step;
    drop_path_rate: the rate of stochastic depth (drop-connect); 0 is off.
    With benchmark, times the same Trainer's step instead (see _benchmark).

    The Trainer holds the input iterator; a script keeps it until it exits (see
    cli.guard.guarded) because destroying that iterator can stall.
    """
    checks.check_at_least(0, weight_decay=weight_decay)
    checks.check_fraction(high_open=True, drop_path_rate=drop_path_rate)
    # Before a task starts serving: every task of the cluster refuses alike.
    gradient_accumulation.check_deployment(config.gradient_accumulation_steps,
                                           deployment.sync_replicas)
    if benchmark is not None:
        benchmark_lib.check_one_process(deployment.mode)
    if deployment.serves_only:  # a ps task, or a worker the chief schedules steps on
        model_deploy.serve(deployment)
        return None
    # First: clones on CPU need the device split before TensorFlow starts.
    plan = deployment_plan.create(deployment)
    strategy = plan.strategy
    if data.seed is not None:  # seeds weights, dropout and augmentation, not only data
        seeding.seed_everything(data.seed)
    if data.deterministic:
        if data.seed is None:  # TensorFlow refuses unseeded random ops then
            raise UsageError('--deterministic needs --seed=N: the same N reproduces the run.')
        seeding.make_deterministic()
    assembly = (assemble_synthetic_data(data) if benchmark and not data.dataset_dir
                else _assemble_data(data, is_training=True,
                                    data_service_run=f'{config.train_dir} {data!r}'))
    if data.data_service_address and config.checkpoint_input_position:
        logging.info('Input from the tf.data service: its position lives in the '
                     'dispatcher\'s job, not in checkpoints; a resumed run rejoins the job.')
        config = dataclasses.replace(config, checkpoint_input_position=False)
    learning_rate_fn = learning_rate.create_learning_rate_fn(
        learning_rate_config, assembly.spec.num_samples, data.batch_size,
        batches_per_update=(deployment.gradients_per_update
                            * config.gradient_accumulation_steps),
        max_number_of_steps=config.max_number_of_steps)
    with strategy.scope():
        quantization_aware = quantize_delay is not None and quantize_delay >= 0
        network = nets_factory.get_network_fn(
            data.model_name, assembly.num_classes, weight_decay=weight_decay,
            is_training=True, quantization=(quantization.QuantizationParams(quantize_delay)
                                            if quantization_aware else None),
            drop_path_rate=drop_path_rate,  # 0 is off, even where the net's default is not
            batch_norm_decay=data.batch_norm_decay, batch_norm_epsilon=data.batch_norm_epsilon)
        if quantization_aware:
            logging.info('Quantization-aware training: fake quantization from step %d.',
                         quantize_delay)
        optimizer = optimizers.create_optimizer(optimizer_config)
    logging.info('Training %s on %s/%s (%d examples, %d classes) with %d replica(s).',
                 data.model_name, data.dataset_name, data.dataset_split_name,
                 assembly.spec.num_samples, assembly.num_classes,
                 strategy.num_replicas_in_sync)
    trainer = trainer_lib.Trainer(
        plan=plan, network=network, optimizer=optimizer,
        learning_rate_fn=learning_rate_fn, input_fn=assembly.input_fn,
        image_shape=assembly.image_shape, config=config)
    if benchmark is not None:
        return _benchmark(trainer, benchmark, data, assembly)
    if plan.is_chief:
        _log_plan(plan, data, config, assembly, learning_rate_fn, network)
    try:
        trainer.train()
    except tf.errors.InvalidArgumentError as error:
        message = input_pipeline.data_error_message(error)
        if message is None:
            raise
        trainer.save_now()  # the steps before the bad record are kept
        raise DataError(message) from None
    if plan.is_chief and not config.checkpoint_path:  # from scratch: the statistics too
        batch_norm_job.warn_if_immature_after_training(data, int(trainer.global_step.numpy()))
    return trainer


def _log_plan(plan, data: DataConfig, config: trainer_lib.TrainConfig, assembly,
              learning_rate_fn, network):
    """The chief's deployment plan, with the run's recipes, schedule and variables."""
    micro_batches = config.gradient_accumulation_steps
    recipes = ([f'accumulation: {micro_batches} micro-batches per update '
                f'({micro_batches * data.batch_size} examples per replica)']
               if micro_batches > 1 else [])
    if config.distillation.enabled:
        recipes.append(f'distillation: teacher {config.distillation.describe()}')
    recipes += batch_norm_job.plan_lines(data)
    logging.info('%s', plan.describe(
        batch_size=data.batch_size, train_dir=config.train_dir,
        input_source=assembly.input_source,
        checkpoint_input_position=config.checkpoint_input_position, extra=recipes + [
            f'learning rate: {_describe_schedule(learning_rate_fn, data.batch_size)}',
            'variables:    ' + ', '.join(
                f'{count} on {device or "this process"}' for device, count in
                model_deploy.variable_placement(network.variables).items())]))


def _benchmark(trainer: trainer_lib.Trainer, benchmark: benchmark_lib.BenchmarkConfig,
               data: DataConfig, assembly) -> benchmark_lib.BenchmarkRun:
    """Times the trainer's compiled step on synthetic data, and on the training input
    with --dataset_dir; prints the figures. Nothing is restored or saved."""
    setting = Setting(
        model_name=data.model_name, task='training', precision=trainer.config.precision,
        batch_size=data.batch_size, replicas=trainer.strategy.num_replicas_in_sync,
        image_shape=assembly.image_shape, data=benchmark_lib.describe_data(
            data.dataset_name, data.dataset_split_name, data.dataset_dir))
    try:
        run = benchmark_lib.benchmark_training(
            trainer, benchmark, setting, num_classes=assembly.num_classes,
            real_input_fn=assembly.input_fn if data.dataset_dir else None)
    except tf.errors.InvalidArgumentError as error:
        message = input_pipeline.data_error_message(error)
        if message is None:
            raise
        raise DataError(message) from None
    return benchmark_lib.report(run, benchmark.json_path)


def dry_run_restore(data: DataConfig, config: trainer_lib.TrainConfig):
    """Prints what training would restore from config.checkpoint_path; trains nothing.

    Ends with the error training would give, if the restore cannot be done.
    """
    if not config.checkpoint_path:
        raise UsageError('--dry_run_restore needs --checkpoint_path, the checkpoint to '
                         'inspect.')
    assembly = _assemble_data(data, is_training=True)
    network = nets_factory.get_network_fn(data.model_name, assembly.num_classes,
                                          is_training=True,
                                          batch_norm_epsilon=data.batch_norm_epsilon)
    network.build(assembly.image_shape)
    plan = restore_lib.plan_restore(network, config.checkpoint_path,
                                    exclude_scopes=config.checkpoint_exclude_scopes)
    print(plan.describe(verbose=True), flush=True)
    plan.check(config.ignore_missing_vars, fine_tuning=True)
    return plan


@dataclasses.dataclass(frozen=True)
class TrainingJob:
    """Everything train_image_classifier.py's flags ask for (cli.configs builds it)."""
    data: DataConfig
    config: trainer_lib.TrainConfig
    optimizer_config: optimizers.OptimizerConfig
    learning_rate_config: learning_rate.LearningRateConfig
    weight_decay: float
    quantize_delay: Optional[int]  # None or negative: float training
    flags_record: run_record.FlagsRecord  # the chief writes it to the train_dir
    # None with dry_run_restore, which trains nothing (cluster flags are not read).
    deployment: Optional[model_deploy.DeploymentConfig] = None
    dry_run_restore: bool = False
    drop_path_rate: float = 0.0  # stochastic depth; 0: off
    # Time the training step instead of training (training.benchmark); None: train.
    benchmark: Optional[benchmark_lib.BenchmarkConfig] = None
    threads: ThreadConfig = ThreadConfig()  # applied before any op


def _lock_train_dir(train_dir: str) -> Optional[lock_lib.TrainDirLock]:
    """The train_dir's lock (see training.checkpoints.lock), taken before anything is
    written there; None for a remote train_dir (gs://...), whose file systems lack the
    exclusive create the lock needs."""
    paths.check_output_dir(train_dir, '--train_dir')
    if '://' in train_dir:
        logging.info('--train_dir=%s is remote: not locked against a second training.',
                     train_dir)
        return None
    os.makedirs(train_dir, exist_ok=True)
    return lock_lib.acquire(train_dir)


def run(job: TrainingJob):
    """Trains as job says (its Trainer is returned), or only prints the restore plan.
    Only the chief writes to the train_dir, so only the chief locks it."""
    threads.apply(job.threads)  # before TensorFlow's first op
    if job.dry_run_restore:
        if job.benchmark is not None:
            raise UsageError('--benchmark trains nothing to restore into; pass '
                             '--benchmark or --dry_run_restore, not both.')
        return dry_run_restore(job.data, job.config)
    if job.benchmark is not None:  # writes nothing: no lock, no run record
        logging.info('--benchmark: fresh weights; nothing is written to --train_dir, '
                     'and no checkpoint there is resumed.')
        return train(job.data, job.deployment, job.config, job.optimizer_config,
                     job.learning_rate_config, job.weight_decay,
                     quantize_delay=job.quantize_delay, drop_path_rate=job.drop_path_rate,
                     benchmark=job.benchmark)
    writes = job.deployment.is_chief and not job.deployment.serves_only
    lock = _lock_train_dir(job.config.train_dir) if writes else None
    try:
        if writes:
            run_record.write(job.config.train_dir, job.flags_record,
                             job.config.max_number_of_steps)
        return train(job.data, job.deployment, job.config, job.optimizer_config,
                     job.learning_rate_config, job.weight_decay,
                     quantize_delay=job.quantize_delay, drop_path_rate=job.drop_path_rate)
    finally:
        if lock is not None:
            lock.release()
