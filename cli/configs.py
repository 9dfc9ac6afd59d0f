"""Parsed flags -> the frozen config objects the library takes (it never reads FLAGS)."""
import dataclasses
from typing import Optional

from absl import flags

from cli import jobs
from core import checks
from core.errors import UsageError
from deployment import cluster, model_deploy
from training import eval_loop, learning_rate, optimizers

FLAGS = flags.FLAGS


def _from_dataclass(config_class):
    return config_class(**{f.name: FLAGS[f.name].value
                           for f in dataclasses.fields(config_class)})


def split_scopes(flag_name: str):
    """A comma-separated scope list flag, e.g. 'InceptionV3/Logits,InceptionV3/AuxLogits'.

    Spaces are refused: slim matched them literally, so a list written with them
    silently excluded or trained nothing.
    """
    value = FLAGS[flag_name].value or ''
    if any(c.isspace() for c in value):
        joined = ','.join(s.strip() for s in value.split(',') if s.strip())
        raise UsageError(f'--{flag_name}={value!r} has spaces; scope names have none: '
                         f'pass --{flag_name}={joined}.')
    return tuple(s for s in value.split(',') if s)


def data_config_from_flags(*, default_batch_size: int, image_size: Optional[int],
                           seed: Optional[int] = None) -> jobs.DataConfig:
    """The data flags shared by training and evaluation, as a DataConfig.

    Only an unset --batch_size or image size takes the default: 0 is an error.
    """
    image_size_flag = next((name for name in ('train_image_size', 'eval_image_size')
                            if name in FLAGS), 'image_size')
    checks.check_at_least(1, unset='the network\'s default',
                          **{image_size_flag: image_size})
    return jobs.DataConfig(
        dataset_name=FLAGS.dataset_name, dataset_split_name=FLAGS.dataset_split_name,
        dataset_dir=FLAGS.dataset_dir, file_pattern=FLAGS.file_pattern,
        model_name=FLAGS.model_name, preprocessing_name=FLAGS.preprocessing_name,
        batch_size=(default_batch_size if FLAGS.batch_size is None
                    else FLAGS.batch_size), image_size=image_size,
        labels_offset=FLAGS.labels_offset, use_grayscale=FLAGS.use_grayscale,
        num_readers=FLAGS.num_readers,
        num_preprocessing_threads=FLAGS.num_preprocessing_threads, seed=seed,
        shuffle_buffer_size=FLAGS.shuffle_buffer_size, deterministic=FLAGS.deterministic,
        cache=FLAGS.cache)


def deployment_config_from_flags() -> model_deploy.DeploymentConfig:
    """The deployment, its cluster from the flags, TF_CONFIG or SLURM; worker and ps
    counts left unset on the command line come from the cluster."""
    def if_given(name):
        return FLAGS[name].value if FLAGS[name].present else None

    resolved = cluster.resolve(
        ps_hosts=FLAGS.ps_hosts, worker_hosts=FLAGS.worker_hosts, job_name=FLAGS.job_name,
        task=FLAGS.task, num_ps_tasks=FLAGS.num_ps_tasks,
        slurm_base_port=FLAGS.slurm_base_port)
    return model_deploy.from_flags(
        num_clones=FLAGS.num_clones, clone_on_cpu=FLAGS.clone_on_cpu,
        worker_replicas=if_given('worker_replicas'), num_ps_tasks=if_given('num_ps_tasks'),
        task=FLAGS.task, sync_replicas=FLAGS.sync_replicas,
        replicas_to_aggregate=FLAGS.replicas_to_aggregate, strategy=FLAGS.strategy,
        cluster=resolved, wait_for_chief_secs=FLAGS.wait_for_chief_secs)


def optimizer_config_from_flags() -> optimizers.OptimizerConfig:
    return _from_dataclass(optimizers.OptimizerConfig)


def learning_rate_config_from_flags() -> learning_rate.LearningRateConfig:
    return _from_dataclass(learning_rate.LearningRateConfig)


def clone_deployment_from_flags() -> model_deploy.DeploymentConfig:
    """Evaluation's replicas: --num_clones on this machine, no cluster."""
    return model_deploy.from_flags(num_clones=FLAGS.num_clones,
                                   clone_on_cpu=FLAGS.clone_on_cpu)


def top_k_from_flags() -> tuple:
    try:
        top_k = tuple(int(k) for k in FLAGS.top_k)
    except ValueError:
        top_k = ()
    if not top_k or min(top_k) < 1:
        raise UsageError(f'--top_k={",".join(FLAGS.top_k)}; pass positive whole numbers '
                         'such as --top_k=1,5.')
    return top_k


def watch_config_from_flags() -> Optional[eval_loop.WatchConfig]:
    """Continuous evaluation's settings; None to evaluate one checkpoint."""
    if FLAGS.eval_interval_secs is None:
        for name in ('eval_timeout_secs', 'backfill'):
            if FLAGS[name].present:
                raise UsageError(f'--{name} applies to continuous evaluation; add '
                                 '--eval_interval_secs=<seconds> or drop it.')
        return None
    return eval_loop.WatchConfig(interval_secs=FLAGS.eval_interval_secs,
                                 timeout_secs=FLAGS.eval_timeout_secs,
                                 backfill=FLAGS.backfill)
