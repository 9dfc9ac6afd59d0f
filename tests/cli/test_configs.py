"""Parsed flags -> each job's configs: fields read from same-named flags, the rest
mapped, per-job defaults for flags left unset."""
import dataclasses
import logging
import re

import pytest

from cli import batch_norm_job, configs
from cli import flags as cli_flags
from cli.assembly import DataConfig
from cli.export_job import ExportConfig
from core.errors import UsageError
from datasets import dataset_utils
from export import pipeline
from preprocessing.augment_policies import AugmentationConfig
from training.recipes import batch_mixing
from training.recipes import distillation
from training.loop import trainer

TRAIN, EVAL, EXPORT, CONVERT = cli_flags.SCRIPTS

# Config fields without a flag of their name: mapped in cli.configs, or not flags.
UNNAMED_FIELDS = [
    (TRAIN, trainer.TrainConfig, {'num_image_summaries', 'mixing', 'distillation'}),
    (TRAIN, batch_mixing.MixingConfig, set()),
    (TRAIN, distillation.DistillationConfig, set()),
    # preprocessing_options: an imported checkpoint's (cli/imported_preprocessing.py).
    (TRAIN, DataConfig, {'image_size', 'preprocessing_options'}),
    # Evaluation neither augments nor reads through the tf.data service.
    (EVAL, DataConfig, {'image_size', 'seed', 'augmentation', 'data_service_address',
                        'wait_for_data_service_secs', 'preprocessing_options'}),
    (EXPORT, ExportConfig, {'use_moving_averages', 'recompute'}),
    (EVAL, batch_norm_job.RecomputeConfig, set()),
    (EXPORT, batch_norm_job.RecomputeConfig, set()),
    (EXPORT, pipeline.ExportRequest, {'targets', 'training_graph', 'float_tolerance',
                                      'labels_dir'}),
    (CONVERT, dataset_utils.ConvertOptions, set()),
]


@pytest.mark.parametrize('script, config_class, unnamed', UNNAMED_FIELDS)
def test_config_fields_come_from_flags_of_their_name(script, config_class, unnamed,
                                                     script_flags):
    values, _ = script_flags(script)
    fields = {field.name for field in dataclasses.fields(config_class)}
    assert fields - set(values) == unnamed


def test_training_job(parsed, tmp_path):
    job = configs.training_from_flags(parsed(
        TRAIN, f'--train_dir={tmp_path}', '--max_number_of_steps=7', '--steps_per_loop=3',
        '--save_interval_secs=5', '--checkpoint_exclude_scopes=A/Logits,A/Aux',
        '--optimizer=sgd', '--learning_rate=0.5', '--weight_decay=0.1',
        '--quantize_delay=2', '--moving_average_decay=0.99', '--num_clones=2',
        '--clone_on_cpu'))
    assert (job.config.train_dir, job.config.max_number_of_steps,
            job.config.steps_per_loop, job.config.save_interval_secs) == (
                str(tmp_path), 7, 3, 5)
    assert job.config.checkpoint_exclude_scopes == ('A/Logits', 'A/Aux')
    assert job.config.moving_average_decay == 0.99
    assert (job.optimizer_config.optimizer, job.learning_rate_config.learning_rate) == (
        'sgd', 0.5)
    assert (job.weight_decay, job.quantize_delay) == (0.1, 2)
    assert job.deployment.num_clones == 2 and not job.dry_run_restore
    # Unset: TF-Slim's training defaults.
    assert (job.data.batch_size, job.config.batch_size) == (32, 32)
    assert (job.data.dataset_name, job.data.dataset_split_name) == ('imagenet', 'train')


def test_a_dry_run_reads_no_cluster(parsed, tmp_path):
    job = configs.training_from_flags(parsed(
        TRAIN, f'--train_dir={tmp_path}', '--dry_run_restore', '--sync_replicas'))
    assert job.dry_run_restore and job.deployment is None


def test_scopes_with_spaces_name_the_fix(parsed, tmp_path):
    with pytest.raises(UsageError, match='--trainable_scopes=A,B'):
        configs.training_from_flags(parsed(TRAIN, f'--train_dir={tmp_path}',
                                           '--trainable_scopes=A, B'))


def test_augmentation_flags_reach_the_training_data_and_not_evaluation(parsed, tmp_path):
    job = configs.training_from_flags(parsed(
        TRAIN, f'--train_dir={tmp_path}', '--augmentation=randaugment',
        '--randaugment_layers=3', '--randaugment_magnitude=9', '--random_erase_prob=0.25'))
    assert job.data.augmentation == AugmentationConfig('randaugment', 3, 9.0, 0.25)
    default = configs.training_from_flags(parsed(TRAIN, f'--train_dir={tmp_path}'))
    assert default.data.augmentation == AugmentationConfig()
    assert not default.data.augmentation.changes_training  # TF-Slim's preprocessing
    evaluation = configs.evaluation_from_flags(parsed(EVAL, f'--eval_dir={tmp_path}'))
    assert evaluation.data.augmentation == AugmentationConfig()
    for flag, fix in [('--randaugment_magnitude=12', 'pass a value in [0, 10]'),
                      ('--random_erase_prob=-0.1', 'pass a value in [0, 1]')]:
        with pytest.raises(UsageError, match=re.escape(f'{flag} is out of range; {fix}')):
            configs.training_from_flags(parsed(TRAIN, f'--train_dir={tmp_path}', flag))


def test_batch_recipe_flags_reach_the_training_config(parsed, tmp_path):
    job = configs.training_from_flags(parsed(
        TRAIN, f'--train_dir={tmp_path}', '--mixup_alpha=0.2', '--cutmix_alpha=1.0',
        '--mix_prob=0.5', '--mix_switch_prob=0.25', '--gradient_accumulation_steps=4'))
    assert job.config.mixing == batch_mixing.MixingConfig(0.2, 1.0, 0.5, 0.25)
    assert job.config.gradient_accumulation_steps == 4
    default = configs.training_from_flags(parsed(TRAIN, f'--train_dir={tmp_path}'))
    assert not default.config.mixing.enabled
    assert default.config.gradient_accumulation_steps == 1
    for flag in ('--mix_prob=2', '--gradient_accumulation_steps=0'):
        with pytest.raises(UsageError, match=re.escape(f'{flag} is out of range')):
            configs.training_from_flags(parsed(TRAIN, f'--train_dir={tmp_path}', flag))


def test_distillation_flags_reach_the_training_config(parsed, tmp_path):
    job = configs.training_from_flags(parsed(
        TRAIN, f'--train_dir={tmp_path}', '--teacher_model_name=cifarnet',
        '--teacher_checkpoint_path=/teacher', '--distillation_weight=0.3',
        '--distillation_temperature=4'))
    assert job.config.distillation == distillation.DistillationConfig(
        'cifarnet', '/teacher', 0.3, 4.0)
    default = configs.training_from_flags(parsed(TRAIN, f'--train_dir={tmp_path}'))
    assert not default.config.distillation.enabled
    for flags, match in [(['--teacher_model_name=cifarnet'],
                          '--teacher_model_name needs --teacher_checkpoint_path'),
                         (['--teacher_checkpoint_path=/t'],
                          '--teacher_checkpoint_path needs --teacher_model_name'),
                         (['--teacher_model_name=cifarnet', '--teacher_checkpoint_path=/t',
                           '--distillation_weight=-1'], '--distillation_weight=-1 is out')]:
        with pytest.raises(UsageError, match=match):
            configs.training_from_flags(parsed(TRAIN, f'--train_dir={tmp_path}', *flags))


class _NetworkMade(Exception):
    pass


# 0 (off) reaches the net too: EfficientNet's builder defaults to 0.2 (nets_factory drops
# it for nets without drop-path).
@pytest.mark.parametrize('flag, passed', [(None, {'drop_path_rate': 0.0}),
                                          ('--drop_path_rate=0', {'drop_path_rate': 0.0}),
                                          ('--drop_path_rate=0.1', {'drop_path_rate': 0.1})])
def test_drop_path_rate_reaches_the_students_network(
        parsed, tmp_path, monkeypatch, flag, passed):
    from cli import train_job
    from helpers import testing_utils
    testing_utils.write_small_shapes(tmp_path / 'data')
    job = configs.training_from_flags(parsed(
        TRAIN, f'--train_dir={tmp_path / "train"}', '--dataset_name=shapes',
        f'--dataset_dir={tmp_path / "data"}', '--model_name=lenet',
        *([flag] if flag else [])))
    options = {}

    def get_network_fn(name, num_classes, **kwargs):
        options.update({k: v for k, v in kwargs.items() if v is not None})
        raise _NetworkMade

    monkeypatch.setattr(train_job.nets_factory, 'get_network_fn', get_network_fn)
    with pytest.raises(_NetworkMade):
        train_job.run(job)
    assert {k: v for k, v in options.items() if k == 'drop_path_rate'} == passed
    with pytest.raises(UsageError, match='--drop_path_rate=1 is out of range'):
        train_job.train(job.data, job.deployment, job.config, job.optimizer_config,
                        job.learning_rate_config, 0.0, drop_path_rate=1.0)


def test_evaluation_job(parsed, tmp_path):
    job = configs.evaluation_from_flags(parsed(
        EVAL, '--checkpoint_path=/ckpt', f'--eval_dir={tmp_path}', '--top_k=1,3',
        '--moving_average_decay=0.5', '--quantize', '--eval_image_size=40'))
    assert (job.checkpoint_path, job.eval_dir, job.top_k) == ('/ckpt', str(tmp_path), (1, 3))
    assert job.use_moving_averages and job.quantize and job.watch is None
    assert (job.data.batch_size, job.data.dataset_split_name, job.data.image_size) == (
        100, 'test', 40)
    with pytest.raises(UsageError, match='--eval_image_size=0'):
        configs.evaluation_from_flags(parsed(EVAL, '--eval_image_size=0'))


def test_export_job(parsed, tmp_path):
    job = configs.export_from_flags(parsed(
        EXPORT, f'--export_dir={tmp_path}', '--export_format=graphdef', '--is_training',
        '--parity_tolerance=0.01', '--model_name=lenet', '--num_frames=4'))
    assert job.request.targets == {'graphdef': f'{tmp_path}/inference_graph.pb'}
    assert job.request.training_graph and job.request.float_tolerance == 0.01
    assert job.request.labels_dir == str(tmp_path) and job.request.batch_size is None
    assert (job.config.model_name, job.config.dataset_name, job.config.num_frames) == (
        'lenet', 'imagenet', 4)
    assert not job.config.use_moving_averages


def test_conversion(parsed, tmp_path):
    conversion = configs.conversion_from_flags(parsed(
        CONVERT, f'--dataset_dir={tmp_path}', '--train_shards=3', '--keep_archives'))
    assert conversion.dataset_name is None  # download_and_convert asks for one
    assert conversion.options == dataset_utils.ConvertOptions(keep_archives=True,
                                                              train_shards=3)


@pytest.mark.parametrize('script', [TRAIN, EVAL])
def test_slims_master_is_accepted_and_noted_as_not_needed(parsed, tmp_path, script,
                                                          caplog):
    # Other tests' TensorFlow calls can leave absl's own logger at WARNING
    # (tf.saved_model.save does); caplog restores the level it sets exactly.
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.INFO, logger='absl')
    args = [f'--train_dir={tmp_path}'] if script == TRAIN else []
    build = (configs.training_from_flags if script == TRAIN
             else configs.evaluation_from_flags)
    build(parsed(script, *args))
    assert '--master' not in caplog.text  # not passed: not mentioned
    build(parsed(script, *args, '--master='))
    assert "--master='' is TF-Slim's session target, not needed here" in caplog.text
