"""Parsed flags -> the frozen configs each job takes (the library never reads FLAGS).

One function per script builds its job: training_from_flags, evaluation_from_flags
(benchmark_from_flags: with --benchmark, cli.benchmark_job times that job instead),
export_from_flags, conversion_from_flags, averaging_from_flags, import_from_flags,
timm_import_from_flags, prediction_from_flags. A config field whose flag has the same
name (cli.flags gives a name one meaning) is read from it; the rest are mapped here.
Each takes the FlagValues to read, absl's global FLAGS by default.
"""
import dataclasses
import sys
from typing import Optional

from absl import flags, logging

from cli import batch_norm_job, benchmark_flags, imported_preprocessing, run_record
from cli.assembly import DataConfig, preprocessing_family
from cli.averaging_job import AveragingJob
from cli.eval_job import EvaluationJob
from cli.export_job import ExportConfig, ExportJob
from cli.flag_groups.data import DEFAULT_DATASET
from cli.import_weights_job import ImportJob
from cli.timm_import_job import TimmImportJob
from cli.predict_job import PredictionJob
from cli.train_job import TrainingJob
from core import checks, threads
from core.errors import UsageError
from core.threads import ThreadConfig
from datasets import dataset_utils
from deployment import cluster, collectives, device_input, model_deploy
from export import pipeline
from nets import nets_factory
from preprocessing import augment_policies
from training.benchmark.throughput import BenchmarkConfig
from training.recipes import batch_mixing
from training.checkpoints import watch as watch_lib
from training.recipes import distillation
from training.recipes import learning_rate
from training.recipes import optimizers
from training.loop import trainer

FLAGS = flags.FLAGS
# --batch_size and --dataset_split_name left unset, per job (as TF-Slim's scripts).
TRAIN_BATCH_SIZE, EVAL_BATCH_SIZE = 32, 100
TRAIN_SPLIT, EVAL_SPLIT = 'train', 'test'


def _from_flags(config_class, flag_values: flags.FlagValues, **mapped):
    """config_class from the flags named as its fields; `mapped` gives the other fields
    (and overrides). Fields with neither keep their defaults."""
    return config_class(**{field.name: flag_values[field.name].value
                           for field in dataclasses.fields(config_class)
                           if field.name in flag_values and field.name not in mapped},
                        **mapped)


def _dataset_name(flag_values) -> str:
    return flag_values.dataset_name or DEFAULT_DATASET


def split_scopes(flag_name: str, flag_values: flags.FlagValues = FLAGS) -> tuple:
    """A comma-separated scope list flag, e.g. 'InceptionV3/Logits,InceptionV3/AuxLogits'.

    Spaces are refused: slim matched them literally, so a list written with them
    silently excluded or trained nothing.
    """
    value = flag_values[flag_name].value or ''
    if any(c.isspace() for c in value):
        joined = ','.join(s.strip() for s in value.split(',') if s.strip())
        raise UsageError(f'--{flag_name}={value!r} has spaces; scope names have none: '
                         f'pass --{flag_name}={joined}.')
    return tuple(s for s in value.split(',') if s)


def data_config_from_flags(flag_values: flags.FlagValues, *, image_size_flag: str,
                           default_batch_size: int, default_split: str) -> DataConfig:
    """The data flags shared by training and evaluation, as a DataConfig.

    Only an unset --batch_size or image size takes the default: 0 is an error. The
    Augmentation flags are training's: a script without them gets no augmentation.
    """
    image_size = flag_values[image_size_flag].value
    checks.check_at_least(1, unset='the network\'s default', **{image_size_flag: image_size})
    batch_size = flag_values.batch_size
    augmentation = (_from_flags(augment_policies.AugmentationConfig, flag_values)
                    if 'augmentation' in flag_values
                    else augment_policies.AugmentationConfig())
    return _from_flags(
        DataConfig, flag_values, dataset_name=_dataset_name(flag_values),
        dataset_split_name=flag_values.dataset_split_name or default_split,
        batch_size=default_batch_size if batch_size is None else batch_size,
        image_size=image_size, augmentation=augmentation)


def deployment_config_from_flags(
        flag_values: flags.FlagValues = FLAGS) -> model_deploy.DeploymentConfig:
    """The deployment, its cluster from the flags, TF_CONFIG, SLURM or the Kubernetes
    pod; worker and ps counts left unset on the command line come from the cluster."""
    def if_given(name):
        return flag_values[name].value if flag_values[name].present else None

    resolved = cluster.resolve(
        ps_hosts=flag_values.ps_hosts, worker_hosts=flag_values.worker_hosts,
        job_name=flag_values.job_name, task=flag_values.task,
        num_ps_tasks=flag_values.num_ps_tasks, slurm_base_port=flag_values.slurm_base_port,
        kubernetes_service=flag_values.kubernetes_service,
        kubernetes_port=flag_values.kubernetes_port,
        worker_replicas=if_given('worker_replicas'))
    return model_deploy.from_flags(
        num_clones=flag_values.num_clones, clone_on_cpu=flag_values.clone_on_cpu,
        worker_replicas=if_given('worker_replicas'), num_ps_tasks=if_given('num_ps_tasks'),
        task=flag_values.task, sync_replicas=flag_values.sync_replicas,
        replicas_to_aggregate=flag_values.replicas_to_aggregate,
        strategy=flag_values.strategy, cluster=resolved,
        wait_for_chief_secs=flag_values.wait_for_chief_secs,
        preemption_grace_secs=flag_values.preemption_grace_secs,
        all_reduce=_all_reduce_from_flags(flag_values),
        prefetch=_prefetch_from_flags(flag_values))


def _all_reduce_from_flags(flag_values: flags.FlagValues) -> collectives.AllReduceConfig:
    """The Device performance group's all-reduce; TensorFlow's choice without the group."""
    if 'all_reduce_alg' not in flag_values:
        return collectives.AllReduceConfig()
    return collectives.AllReduceConfig(
        algorithm=flag_values.all_reduce_alg, num_packs=flag_values.num_packs,
        bytes_per_pack=flag_values.all_reduce_bytes_per_pack,
        weight_factors=flag_values.all_reduce_weight_factors)


def _prefetch_from_flags(flag_values: flags.FlagValues) -> device_input.DevicePrefetch:
    if 'prefetch_to_device' not in flag_values:
        return device_input.DevicePrefetch()
    return device_input.DevicePrefetch(to_device=flag_values.prefetch_to_device,
                                       buffer_size=flag_values.per_replica_buffer_size)


def _note_slim_session_target(flag_values: flags.FlagValues):
    """Slim's scripts pass --master (a TF1 session target); TF2 needs none: one line."""
    if flag_values['master'].present:
        logging.info('--master=%r is TF-Slim\'s session target, not needed here: ignored '
                     '(a cluster is --worker_hosts, --ps_hosts or TF_CONFIG).',
                     flag_values.master)


def training_from_flags(flag_values: flags.FlagValues = FLAGS,
                        script: Optional[str] = None) -> TrainingJob:
    """train_image_classifier.py's job; script (default: the running one) names whose
    flags the run records in its train_dir."""
    _note_slim_session_target(flag_values)
    data = data_config_from_flags(flag_values, image_size_flag='train_image_size',
                                  default_batch_size=TRAIN_BATCH_SIZE,
                                  default_split=TRAIN_SPLIT)
    data = _with_imported_preprocessing(data, flag_values)
    config = _from_flags(
        trainer.TrainConfig, flag_values, batch_size=data.batch_size,
        checkpoint_exclude_scopes=split_scopes('checkpoint_exclude_scopes', flag_values),
        trainable_scopes=split_scopes('trainable_scopes', flag_values),
        mixing=_from_flags(batch_mixing.MixingConfig, flag_values),
        distillation=_from_flags(distillation.DistillationConfig, flag_values))
    dry_run = flag_values.dry_run_restore
    deployment = None if dry_run else deployment_config_from_flags(flag_values)
    return TrainingJob(
        data=data, config=config,
        optimizer_config=_from_flags(optimizers.OptimizerConfig, flag_values),
        learning_rate_config=_from_flags(learning_rate.LearningRateConfig, flag_values),
        weight_decay=flag_values.weight_decay, quantize_delay=flag_values.quantize_delay,
        drop_path_rate=flag_values.drop_path_rate,
        flags_record=run_record.flags_record(flag_values, script or sys.argv[0]),
        deployment=deployment,
        dry_run_restore=dry_run, threads=_threads_of_task(flag_values, deployment))


def benchmark_from_flags(
        flag_values: flags.FlagValues = FLAGS) -> Optional[BenchmarkConfig]:
    """--benchmark's config (cli.benchmark_job times the script's job with it), or None:
    the script runs its job."""
    return benchmark_flags.from_flags(flag_values)


def _threads_of_task(flag_values: flags.FlagValues,
                     deployment: Optional[model_deploy.DeploymentConfig]) -> ThreadConfig:
    """The thread flags; all-reduce workers sharing a host split its cores (what is left
    unset). Parameter-server clusters keep TensorFlow's defaults: not measured."""
    configured = _from_flags(ThreadConfig, flag_values)
    resolved = deployment.cluster if deployment is not None else None
    if resolved is None or resolved.ps:
        return configured
    return threads.shared_by(configured, resolved.workers_on_this_host())


def top_k_from_flags(flag_values: flags.FlagValues = FLAGS) -> tuple:
    try:
        top_k = tuple(int(k) for k in flag_values.top_k)
    except ValueError:
        top_k = ()
    if not top_k or min(top_k) < 1:
        raise UsageError(f'--top_k={",".join(flag_values.top_k)}; pass positive whole '
                         'numbers such as --top_k=1,5.')
    return top_k


def watch_config_from_flags(
        flag_values: flags.FlagValues = FLAGS) -> Optional[watch_lib.WatchConfig]:
    """Continuous evaluation's settings; None to evaluate one checkpoint."""
    if flag_values.eval_interval_secs is None:
        for name in ('eval_timeout_secs', 'backfill'):
            if flag_values[name].present:
                raise UsageError(f'--{name} applies to continuous evaluation; add '
                                 '--eval_interval_secs=<seconds> or drop it.')
        return None
    return watch_lib.WatchConfig(interval_secs=flag_values.eval_interval_secs,
                                        timeout_secs=flag_values.eval_timeout_secs,
                                        backfill=flag_values.backfill)


def _with_imported_preprocessing(data: DataConfig, flag_values) -> DataConfig:
    """data with the pretrained_cfg of an imported --checkpoint_path (import.json or a
    fine-tuning's preprocessing.json), unless --preprocessing_name is given."""
    if imported_preprocessing.record_of(flag_values.checkpoint_path) is None:
        return data  # the common case: nothing imported (nor the model name looked up)
    family = preprocessing_family(data.preprocessing_name,
                                  nets_factory.get_spec(data.model_name))
    return dataclasses.replace(data, preprocessing_options=imported_preprocessing.options(
        flag_values.checkpoint_path, family,
        named=flag_values['preprocessing_name'].present))


def evaluation_from_flags(flag_values: flags.FlagValues = FLAGS) -> EvaluationJob:
    """eval_image_classifier.py's job: its replicas are --num_clones here, no cluster."""
    _note_slim_session_target(flag_values)
    data = data_config_from_flags(flag_values, image_size_flag='eval_image_size',
                                  default_batch_size=EVAL_BATCH_SIZE,
                                  default_split=EVAL_SPLIT)
    data = _with_imported_preprocessing(data, flag_values)
    return _from_flags(
        EvaluationJob, flag_values, data=data,
        use_moving_averages=flag_values.moving_average_decay is not None,
        top_k=top_k_from_flags(flag_values), watch=watch_config_from_flags(flag_values),
        deployment=model_deploy.from_flags(
            num_clones=flag_values.num_clones, clone_on_cpu=flag_values.clone_on_cpu,
            all_reduce=_all_reduce_from_flags(flag_values),
            prefetch=_prefetch_from_flags(flag_values)),
        recompute=_from_flags(batch_norm_job.RecomputeConfig, flag_values),
        threads=_from_flags(ThreadConfig, flag_values))


def prediction_from_flags(flag_values: flags.FlagValues = FLAGS) -> PredictionJob:
    """predict_image_classifier.py's job. Of the Model group only --model_name and
    --preprocessing_name apply: they name an older SavedModel's preprocessing."""
    for name, why in [('labels_offset', 'the SavedModel names its own classes'),
                      ('use_grayscale', 'the SavedModel converts its input itself')]:
        if flag_values[name].present:
            raise UsageError(f'--{name} is not for prediction ({why}); pass it to the '
                             'export.')
    named = flag_values['model_name'].present or flag_values.preprocessing_name
    return PredictionJob(
        saved_model_dir=flag_values.saved_model_dir,
        image_files=tuple(flag_values.image_files or ()),
        dataset_name=_dataset_name(flag_values), dataset_dir=flag_values.dataset_dir,
        dataset_split_name=flag_values.dataset_split_name or EVAL_SPLIT,
        preprocessing_name=(preprocessing_family(
            flag_values.preprocessing_name, nets_factory.get_spec(flag_values.model_name))
            if named else None),
        num_examples=flag_values.num_examples)


def recompute_from_flags(flag_values: flags.FlagValues = FLAGS) -> batch_norm_job.RecomputeJob:
    """recompute_batch_norm_statistics.py's job: the training split and batch size by
    default; replicas are --num_clones."""
    _note_slim_session_target(flag_values)
    data = data_config_from_flags(flag_values, image_size_flag='image_size',
                                  default_batch_size=TRAIN_BATCH_SIZE,
                                  default_split=TRAIN_SPLIT)
    return batch_norm_job.RecomputeJob(
        data, flag_values.checkpoint_path,
        _from_flags(batch_norm_job.RecomputeConfig, flag_values),
        use_moving_averages=flag_values.moving_average_decay is not None,
        deployment=model_deploy.from_flags(num_clones=flag_values.num_clones,
                                           clone_on_cpu=flag_values.clone_on_cpu))


def averaging_from_flags(flag_values: flags.FlagValues = FLAGS) -> AveragingJob:
    """average_checkpoints.py's job."""
    return _from_flags(AveragingJob, flag_values,
                       checkpoint_prefixes=tuple(flag_values.checkpoint_prefixes or ()))


def import_from_flags(flag_values: flags.FlagValues = FLAGS) -> ImportJob:
    """import_keras_weights.py's job; the Model group's input flags do not apply."""
    for name, why in [('preprocessing_name', 'the net takes its preprocessing with it'),
                      ('labels_offset', 'the import keeps Keras\'s 1,000 classes'),
                      ('use_grayscale', 'Keras\'s weights take 3 channels')]:
        if flag_values[name].present:
            raise UsageError(f'--{name} is not for the import ({why}); pass it to '
                             'training, evaluation or export of the imported checkpoint.')
    return _from_flags(ImportJob, flag_values)


def timm_import_from_flags(flag_values: flags.FlagValues = FLAGS) -> TimmImportJob:
    """import_timm_weights.py's job: the net, the file, the output (and --image_size,
    the grid a position embedding is resampled to)."""
    for name, why in [('preprocessing_name', 'timm\'s pretrained_cfg is kept beside it'),
                      ('labels_offset', 'the import keeps the file\'s classes'),
                      ('use_grayscale', 'timm\'s weights take 3 channels')]:
        if flag_values[name].present:
            raise UsageError(f'--{name} is not for the import ({why}); pass it to '
                             'training, evaluation or export of the imported checkpoint.')
    return _from_flags(TimmImportJob, flag_values)


def _export_formats(flag_values) -> tuple:
    """--export_format, else what the places given imply (TF-Slim's --output_file alone:
    its inference graph, or with --checkpoint_path the frozen graph)."""
    if flag_values.export_format:
        return pipeline.parse_formats(','.join(flag_values.export_format))
    graph = 'frozen_graph' if flag_values.checkpoint_path else 'graphdef'
    return tuple(name for name, given in [
        ('saved_model', flag_values.saved_model_dir
         or (flag_values.export_dir and not flag_values.output_file)),
        (graph, flag_values.output_file)] if given)


def export_from_flags(flag_values: flags.FlagValues = FLAGS) -> ExportJob:
    """export_inference_graph.py's job: what to write (checked first) and from what."""
    # Named as typed: TF-Slim's --batch_size is an alias of --graph_batch_size here.
    batch_flag = 'batch_size' if flag_values['batch_size'].present else 'graph_batch_size'
    checks.check_at_least(1, unset='any batch',
                          **{batch_flag: flag_values.graph_batch_size})
    targets = pipeline.resolve_targets(
        _export_formats(flag_values), export_dir=flag_values.export_dir,
        saved_model_dir=flag_values.saved_model_dir, output_file=flag_values.output_file,
        write_text_graphdef=flag_values.write_text_graphdef)
    request = _from_flags(
        pipeline.ExportRequest, flag_values, targets=targets,
        batch_size=flag_values.graph_batch_size, training_graph=flag_values.is_training,
        float_tolerance=flag_values.parity_tolerance, labels_dir=flag_values.export_dir)
    config = _from_flags(
        ExportConfig, flag_values, dataset_name=_dataset_name(flag_values),
        use_moving_averages=flag_values.moving_average_decay is not None,
        recompute=_from_flags(batch_norm_job.RecomputeConfig, flag_values))
    return ExportJob(config, request)


@dataclasses.dataclass(frozen=True)
class Conversion:
    """download_and_convert_data.py's job: dataset_factory.download_and_convert's
    arguments."""
    dataset_name: Optional[str]  # None: download_and_convert says to name one
    dataset_dir: Optional[str]
    options: dataset_utils.ConvertOptions


def conversion_from_flags(flag_values: flags.FlagValues = FLAGS) -> Conversion:
    return Conversion(flag_values.dataset_name, flag_values.dataset_dir,
                      _from_flags(dataset_utils.ConvertOptions, flag_values))
