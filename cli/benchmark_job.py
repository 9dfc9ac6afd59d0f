"""The benchmark job (--benchmark of the training and evaluation scripts): the script's
own job, built by the same builders (cli.train_job, cli.eval_job), timed instead of
run (training.benchmark). Synthetic data unless --dataset_dir is given; nothing is
written where training or evaluation would write, and no checkpoint is resumed."""
import tensorflow as tf
from absl import logging

from cli.assembly import assemble_synthetic_data
from cli import eval_job, train_job
from core import threads
from core.errors import DataError, UsageError
from datasets import input_pipeline
from training.benchmark import throughput
from training.benchmark.report import Setting
from training.checkpoints import restore


def _data_errors_named(run):
    """run(), a bad record of the real input ending in one line instead of a trace."""
    try:
        return run()
    except tf.errors.InvalidArgumentError as error:
        message = input_pipeline.data_error_message(error)
        if message is None:
            raise
        raise DataError(message) from None


def time_training(job: train_job.TrainingJob,
                  benchmark: throughput.BenchmarkConfig) -> throughput.BenchmarkRun:
    """Times the training job's compiled step (the Trainer train_job builds) on
    synthetic batches, and on the training input with --dataset_dir; prints the figures.
    Fresh weights; writes nothing: no lock, no run record, no checkpoint."""
    threads.apply(job.threads)  # before TensorFlow's first op
    if job.dry_run_restore:
        raise UsageError('--benchmark trains nothing to restore into; pass '
                         '--benchmark or --dry_run_restore, not both.')
    logging.info('--benchmark: fresh weights; nothing is written to --train_dir, '
                 'and no checkpoint there is resumed.')
    data, deployment = job.data, job.deployment
    train_job.check_options(deployment, job.config, job.weight_decay, job.drop_path_rate)
    throughput.check_one_process(deployment.mode)
    plan = train_job.start(data, deployment)
    assembly, config = ((assemble_synthetic_data(data), job.config) if not data.dataset_dir
                        else train_job.training_data(data, job.config))
    trainer = train_job.build_trainer(
        plan, data, assembly, config, job.optimizer_config, job.learning_rate_config,
        weight_decay=job.weight_decay, quantize_delay=job.quantize_delay,
        drop_path_rate=job.drop_path_rate)
    setting = Setting(
        model_name=data.model_name, task='training', precision=config.precision,
        batch_size=data.batch_size, replicas=trainer.strategy.num_replicas_in_sync,
        image_shape=assembly.image_shape, data=throughput.describe_data(
            data.dataset_name, data.dataset_split_name, data.dataset_dir))
    run = _data_errors_named(lambda: throughput.benchmark_training(
        trainer, benchmark, setting, num_classes=assembly.num_classes,
        real_input_fn=assembly.input_fn if data.dataset_dir else None))
    return throughput.report(run, benchmark.json_path)


def time_evaluation(job: eval_job.EvaluationJob,
                    benchmark: throughput.BenchmarkConfig) -> throughput.BenchmarkRun:
    """Times the evaluation job's compiled counting loop (the Evaluator eval_job builds)
    on synthetic batches, and on the split with --dataset_dir; prints the figures.
    Weights: --checkpoint_path's if given, else fresh. Nothing is written to
    --eval_dir."""
    threads.apply(job.threads)  # before TensorFlow's first op
    if job.watch is not None:
        raise UsageError('--benchmark times one evaluation; drop --eval_interval_secs.')
    if job.recompute.recompute_batch_norm_statistics:
        raise UsageError('--recompute_batch_norm_statistics evaluates one checkpoint; '
                         'drop --benchmark.')
    data = job.data
    eval_job.check_options(job.eval_dir, job.max_num_batches)
    deployment, strategy = eval_job.start(job.deployment)
    checkpoint_path = (restore.resolve_checkpoint(job.checkpoint_path, verify=True)
                       if job.checkpoint_path else None)
    batch_size = data.batch_size * strategy.num_replicas_in_sync
    assembly = (eval_job.evaluation_data(data, batch_size) if data.dataset_dir
                else assemble_synthetic_data(data))
    evaluator = eval_job.build_evaluator(data, assembly, deployment, strategy,
                                         checkpoint_path=checkpoint_path,
                                         quantize=job.quantize, top_k=job.top_k)
    if checkpoint_path:
        with strategy.scope():
            restore.restore_network(evaluator.network, checkpoint_path,
                                    use_moving_averages=job.use_moving_averages)
    setting = Setting(
        model_name=data.model_name, task='evaluation', precision='float32',
        batch_size=data.batch_size, replicas=strategy.num_replicas_in_sync,
        image_shape=assembly.image_shape, data=throughput.describe_data(
            data.dataset_name, data.dataset_split_name, data.dataset_dir))
    run = _data_errors_named(lambda: throughput.benchmark_evaluation(
        evaluator, benchmark, setting, batch_size=batch_size,
        real_dataset=assembly.input_fn(None) if data.dataset_dir else None))
    return throughput.report(run, benchmark.json_path)
