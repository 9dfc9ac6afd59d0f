"""The evaluation job: exact passes over a split, of one checkpoint or of each new one."""
import dataclasses
from typing import Optional

from absl import logging

from cli import batch_norm_job, run_record
from cli.assembly import DataConfig, assemble_data, quantization_of
from core import checks, paths, threads
from core.errors import UsageError
from core.threads import ThreadConfig
from datasets import dataset_factory, dataset_utils
from deployment import model_deploy
from nets import nets_factory
from training.checkpoints import watch as watch_lib
from training.checkpoints import restore
from training.evaluation import evaluator as evaluator_lib


def _class_names(data: DataConfig, num_classes: int) -> list:
    """The model's class names: labels.txt in --dataset_dir, else the dataset's own,
    shifted by --labels_offset; a class without a name is its number."""
    names = (dataset_utils.read_label_file(data.dataset_dir)
             if data.dataset_dir and dataset_utils.has_labels(data.dataset_dir)
             else dataset_factory.get_info(data.dataset_name, data.dataset_dir)
             .labels_to_names())
    return [names.get(i + data.labels_offset, str(i)) for i in range(num_classes)]


def check_options(eval_dir: str, max_num_batches: Optional[int]):
    checks.check_at_least(1, unset='the whole split', max_num_batches=max_num_batches)
    paths.check_output_dir(eval_dir, '--eval_dir')


def start(deployment: Optional[model_deploy.DeploymentConfig]):
    """(deployment, its strategy). First: clones on CPU need the device split before
    TensorFlow starts."""
    deployment = deployment or model_deploy.from_flags()
    return deployment, model_deploy.create_strategy(deployment)


def evaluation_data(data: DataConfig, batch_size: int):
    """The split's Assembly, batch_size examples per batch (over all replicas)."""
    return assemble_data(dataclasses.replace(data, batch_size=batch_size), is_training=False)


def build_evaluator(data: DataConfig, assembly, deployment: model_deploy.DeploymentConfig,
                    strategy, *, checkpoint_path: Optional[str], quantize: bool,
                    top_k=evaluator_lib.DEFAULT_TOP_K) -> evaluator_lib.Evaluator:
    """The Evaluator of data.model_name, its network built under the strategy (fake
    quantization as checkpoint_path's, see quantization_of); no weights restored."""
    with strategy.scope():
        network = nets_factory.get_network_fn(
            data.model_name, assembly.num_classes,
            quantization=quantization_of(checkpoint_path, quantize),
            batch_norm_epsilon=data.batch_norm_epsilon)  # the decay only moves in training
        network.build(assembly.image_shape)
    return evaluator_lib.Evaluator(network, num_classes=assembly.num_classes, top_k=top_k,
                                   strategy=strategy,
                                   input_options=deployment.prefetch.input_options)


def evaluate(data: DataConfig, checkpoint_path: str, eval_dir: str,
             max_num_batches: Optional[int] = None, use_moving_averages: bool = False, *,
             top_k=evaluator_lib.DEFAULT_TOP_K,
             watch: Optional[watch_lib.WatchConfig] = None,
             deployment: Optional[model_deploy.DeploymentConfig] = None,
             quantize: bool = False,
             recompute: batch_norm_job.RecomputeConfig = batch_norm_job.RecomputeConfig()):
    """Exact passes over the split: of one checkpoint, or with `watch` of each new
    checkpoint of the train_dir checkpoint_path until the training's last (see
    watch_lib.watch_checkpoints). Prints and writes Accuracy, the top_k recalls,
    per-class accuracy and the confusion matrix; records the best checkpoint. Weights
    are the raw ones, or their moving averages with use_moving_averages. With
    deployment, evaluates over its clones, data.batch_size examples each. Returns the
    last metrics. A quantization-aware checkpoint (or quantize, slim's --quantize) is
    evaluated with fake quantization on, as its int8 export computes."""
    if not checkpoint_path:
        raise UsageError('No checkpoint given; pass --checkpoint_path=<train_dir or '
                         'checkpoint prefix>.')
    check_options(eval_dir, max_num_batches)
    if watch is not None:
        watch_lib.check_train_dir(checkpoint_path)
    deployment, strategy = start(deployment)
    if watch is None:  # a directory's newest intact one, or the one named
        checkpoint_path = restore.resolve_checkpoint(checkpoint_path, verify=True)
    if recompute.recompute_batch_norm_statistics:
        checkpoint_path = _recomputed(data, checkpoint_path, recompute, strategy,
                                      use_moving_averages, quantize, watch)
    batch_size = data.batch_size * strategy.num_replicas_in_sync
    assembly = evaluation_data(data, batch_size)
    evaluator = build_evaluator(data, assembly, deployment, strategy,
                                checkpoint_path=checkpoint_path, quantize=quantize,
                                top_k=top_k)
    network = evaluator.network
    class_names = _class_names(data, assembly.num_classes)
    split_size = assembly.spec.num_samples

    def evaluate_checkpoint(checkpoint):
        with strategy.scope():
            global_step = restore.restore_network(
                network, checkpoint, use_moving_averages=use_moving_averages)
        batch_norm_job.warn_if_immature(data.model_name, checkpoint, global_step)
        metrics = evaluator.evaluate(assembly.input_fn(None), batch_size=batch_size,
                                     num_examples=split_size,
                                     max_num_batches=max_num_batches)
        metrics['split_num_examples'] = split_size
        accounted = metrics['num_examples'] + metrics['num_unreadable']
        if max_num_batches is None and accounted != split_size:
            logging.warning('The split should hold %d examples; %d were read and %d could '
                            'not be decoded (a damaged shard ends at the damage).',
                            split_size, metrics['num_examples'], metrics['num_unreadable'])
        record = evaluator_lib.EvaluationRecord(
            checkpoint=checkpoint, global_step=global_step, model_name=data.model_name,
            dataset_name=data.dataset_name, split_name=data.dataset_split_name)
        evaluator_lib.report(metrics, eval_dir, record, class_names)
        # Following a training, keep the best: the training deletes old restore.
        evaluator_lib.update_best(eval_dir, metrics, record, keep_copy=watch is not None)
        return metrics

    if watch is None:
        return evaluate_checkpoint(checkpoint_path)
    same_evaluation = lambda entry: (  # noqa: E731
        (entry.get('model_name'), entry.get('dataset_name'), entry.get('split_name'))
        == (data.model_name, data.dataset_name, data.dataset_split_name))
    done = evaluator_lib.evaluated_checkpoints(eval_dir, same_evaluation)
    metrics = {}
    for _, checkpoint in watch_lib.watch_checkpoints(
            checkpoint_path, watch, skip=done.__contains__,
            final_step=lambda: run_record.recorded_max_steps(checkpoint_path)):
        metrics = evaluate_checkpoint(checkpoint)
    return metrics


def _recomputed(data, checkpoint_path, recompute, strategy, use_moving_averages, quantize,
                watch):
    """The checkpoint with its batch-norm statistics recomputed on the training split."""
    if watch is not None:
        raise UsageError('--recompute_batch_norm_statistics evaluates one checkpoint; '
                         'drop --eval_interval_secs.')
    return batch_norm_job.recompute_checkpoint(
        dataclasses.replace(data, dataset_split_name=batch_norm_job.TRAIN_SPLIT),
        checkpoint_path, recompute.recompute_batch_norm_statistics,
        output_dir=recompute.batch_norm_statistics_dir, strategy=strategy,
        use_moving_averages=use_moving_averages,
        quantization=quantization_of(checkpoint_path, quantize))


@dataclasses.dataclass(frozen=True)
class EvaluationJob:
    """Everything eval_image_classifier.py's flags ask for: evaluate()'s arguments."""
    data: DataConfig
    checkpoint_path: Optional[str]
    eval_dir: str
    max_num_batches: Optional[int] = None
    use_moving_averages: bool = False
    top_k: tuple = evaluator_lib.DEFAULT_TOP_K
    watch: Optional[watch_lib.WatchConfig] = None
    deployment: Optional[model_deploy.DeploymentConfig] = None
    quantize: bool = False
    recompute: batch_norm_job.RecomputeConfig = batch_norm_job.RecomputeConfig()
    threads: ThreadConfig = ThreadConfig()  # applied before any op


def run(job: EvaluationJob):
    threads.apply(job.threads)  # before TensorFlow's first op
    return evaluate(job.data, job.checkpoint_path, job.eval_dir, job.max_num_batches,
                    job.use_moving_averages, top_k=job.top_k, watch=job.watch,
                    deployment=job.deployment, quantize=job.quantize,
                    recompute=job.recompute)
