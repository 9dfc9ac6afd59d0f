"""The training job: train_image_classifier.py's flags, as configs, to a Trainer."""
import dataclasses
import os
from typing import Optional

from absl import logging
import tensorflow as tf

from cli import batch_norm_job, imported_preprocessing, run_record
from cli.assembly import DataConfig
from cli.assembly import assemble_data as _assemble_data
from core import checks, paths, seeding, threads
from core.errors import DataError, UsageError
from core.threads import ThreadConfig
from datasets import input_pipeline
from deployment import model_deploy, task_server
from deployment import plan as deployment_plan
from nets import nets_factory, quantization
from training.checkpoints import restore as restore_lib
from training.recipes import gradient_accumulation
from training.recipes import decoupled_optimizers
from training.recipes import learning_rate
from training.recipes import optimizers
from training.checkpoints import lock as lock_lib
from training.loop import trainer as trainer_lib


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
    if schedule.scaling:
        text += f' ({schedule.scaling})'
    # Slim counted epochs in per-replica batches; say so, since it sets the step counts.
    return text + (f'; {schedule.steps_per_epoch:g} steps per epoch (batch {batch_size} '
                   'per replica)')


def check_options(deployment: model_deploy.DeploymentConfig, config: trainer_lib.TrainConfig,
                  weight_decay: float, drop_path_rate: float):
    """What training refuses before a task starts serving: every task of the cluster
    refuses alike."""
    checks.check_at_least(0, weight_decay=weight_decay)
    checks.check_fraction(high_open=True, drop_path_rate=drop_path_rate)
    gradient_accumulation.check_deployment(config.gradient_accumulation_steps,
                                           deployment.sync_replicas)


def start(data: DataConfig,
          deployment: model_deploy.DeploymentConfig) -> deployment_plan.DeploymentPlan:
    """The deployment plan, then the seeds. First: clones on CPU need the device split
    before TensorFlow starts."""
    plan = deployment_plan.create(deployment)
    if data.seed is not None:  # seeds weights, dropout and augmentation, not only data
        seeding.seed_everything(data.seed)
    if data.deterministic:
        if data.seed is None:  # TensorFlow refuses unseeded random ops then
            raise UsageError('--deterministic needs --seed=N: the same N reproduces the run.')
        seeding.make_deterministic()
    return plan


def training_data(data: DataConfig, config: trainer_lib.TrainConfig):
    """(the training split's Assembly, config): from the tf.data service, the input
    position is not checkpointed."""
    assembly = _assemble_data(data, is_training=True,
                              data_service_run=f'{config.train_dir} {data!r}')
    if data.data_service_address and config.checkpoint_input_position:
        logging.info('Input from the tf.data service: its position lives in the '
                     'dispatcher\'s job, not in checkpoints; a resumed run rejoins the job.')
        config = dataclasses.replace(config, checkpoint_input_position=False)
    return assembly, config


def build_trainer(plan: deployment_plan.DeploymentPlan, data: DataConfig, assembly,
                  config: trainer_lib.TrainConfig,
                  optimizer_config: optimizers.OptimizerConfig,
                  learning_rate_config: learning_rate.LearningRateConfig, *,
                  weight_decay: float, quantize_delay: Optional[int],
                  drop_path_rate: float) -> trainer_lib.Trainer:
    """The Trainer of data.model_name on assembly's input, as plan deploys it: its
    network and optimizer made under the plan's strategy, its learning-rate schedule."""
    strategy = plan.strategy
    batches_per_update = plan.config.gradients_per_update * config.gradient_accumulation_steps
    learning_rate_fn = learning_rate.create_learning_rate_fn(
        learning_rate_config, assembly.spec.num_samples, data.batch_size,
        batches_per_update=batches_per_update,
        max_number_of_steps=config.max_number_of_steps,
        # Every replica in sync adds its batch to an update (one under parameter servers).
        global_batch_size=(data.batch_size * strategy.num_replicas_in_sync
                           * batches_per_update),
        adaptive=optimizer_config.optimizer in optimizers.ADAPTIVE_NAMES)
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
    return trainer_lib.Trainer(
        plan=plan, network=network, optimizer=optimizer,
        learning_rate_fn=learning_rate_fn, input_fn=assembly.input_fn,
        image_shape=assembly.image_shape, config=config)


def train(data: DataConfig, deployment: model_deploy.DeploymentConfig,
          config: trainer_lib.TrainConfig, optimizer_config: optimizers.OptimizerConfig,
          learning_rate_config: learning_rate.LearningRateConfig, weight_decay: float,
          quantize_delay: Optional[int] = None, drop_path_rate: float = 0.0):
    """Trains data.model_name on data; returns the Trainer. With quantize_delay (a
    step; negative, as slim's -1, or None: off), quantization-aware from that step;
    drop_path_rate: the rate of stochastic depth (drop-connect); 0 is off.

    The Trainer holds the input iterator; a script keeps it until it exits (see
    cli.guard.guarded) because destroying that iterator can stall.
    """
    check_options(deployment, config, weight_decay, drop_path_rate)
    if deployment.serves_only:  # a ps task, or a worker the chief schedules steps on
        task_server.serve(deployment)
        return None
    plan = start(data, deployment)
    assembly, config = training_data(data, config)
    trainer = build_trainer(plan, data, assembly, config, optimizer_config,
                            learning_rate_config, weight_decay=weight_decay,
                            quantize_delay=quantize_delay, drop_path_rate=drop_path_rate)
    if plan.is_chief:
        _log_plan(plan, data, config, assembly, trainer, weight_decay)
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


def describe_weight_decay(optimizer, weight_decay: float) -> Optional[str]:
    """The plan block's line on a modern optimizer's decay beside TF-Slim's L2 term (None
    for TF-Slim's optimizers, whose only decay is the L2 term): which applies where."""
    if not isinstance(optimizer, decoupled_optimizers.DecoupledOptimizer):
        return None
    l2 = (f'L2 --weight_decay={weight_decay:g} in the loss, on the weights the net '
          'regularizes' if weight_decay else 'no L2 term (--weight_decay=0)')
    return f'weight decay: {optimizer.describe_decay()}; {l2}'


def _log_plan(plan, data: DataConfig, config: trainer_lib.TrainConfig, assembly,
              trainer: trainer_lib.Trainer, weight_decay: float):
    """The chief's deployment plan, with the run's recipes, schedule and variables."""
    schedule = trainer.model_step.learning_rate_fn
    micro_batches = config.gradient_accumulation_steps
    recipes = ([f'accumulation: {micro_batches} micro-batches per update '
                f'({micro_batches * data.batch_size} examples per replica)']
               if micro_batches > 1 else [])
    if config.distillation.enabled:
        recipes.append(f'distillation: teacher {config.distillation.describe()}')
    recipes += batch_norm_job.plan_lines(data)
    decay = describe_weight_decay(trainer.optimizer, weight_decay)
    recipes += [decay] if decay else []
    scales = trainer.optimizer.learning_rate_scales
    if scales:  # --layer_decay
        recipes.append(f'layer decay:  {trainer.optimizer.layer_decay:g} over '
                       f'{len(set(scales.values()))} depths: learning rate x '
                       f'{min(scales.values()):.4g} (stem) .. x {max(scales.values()):g} '
                       '(head)')
    logging.info('%s', plan.describe(
        batch_size=data.batch_size, train_dir=config.train_dir,
        input_source=assembly.input_source,
        checkpoint_input_position=config.checkpoint_input_position, extra=recipes + [
            f'learning rate: {_describe_schedule(schedule, data.batch_size)}',
            'variables:    ' + ', '.join(
                f'{count} on {device or "this process"}' for device, count in
                model_deploy.variable_placement(trainer.network.variables).items())]))


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
        return dry_run_restore(job.data, job.config)
    writes = job.deployment.is_chief and not job.deployment.serves_only
    lock = _lock_train_dir(job.config.train_dir) if writes else None
    try:
        if writes:
            run_record.write(job.config.train_dir, job.flags_record,
                             job.config.max_number_of_steps)
            if job.data.preprocessing_options:  # evaluating this run preprocesses alike
                imported_preprocessing.carry(job.config.checkpoint_path,
                                             job.config.train_dir)
        return train(job.data, job.deployment, job.config, job.optimizer_config,
                     job.learning_rate_config, job.weight_decay,
                     quantize_delay=job.quantize_delay, drop_path_rate=job.drop_path_rate)
    finally:
        if lock is not None:
            lock.release()
