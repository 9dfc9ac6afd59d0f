"""One schema: a flag has the default of the config dataclass field it fills, in every
flag group. The field is the one of the flag's name, in every config that has one, or the
field RENAMED names; the exceptions are fields the flag reaches through a conversion (a
list to a tuple, a flag's unset to an empty tuple), named in CONVERTED with why."""
import dataclasses
import importlib
import inspect
import pkgutil

import pytest
from absl import flags

from cli import flags as cli_flags

PACKAGES = ('cli', 'core', 'datasets', 'deployment', 'export', 'nets', 'preprocessing',
            'training')
# Flag -> (class, field) it fills under another name (cli.configs maps it).
RENAMED = {
    'train_image_size': ('DataConfig', 'image_size'),
    'eval_image_size': ('DataConfig', 'image_size'),
    'worker_replicas': ('DeploymentConfig', 'num_replicas'),
    'task': ('DeploymentConfig', 'replica_id'),
    'all_reduce_alg': ('AllReduceConfig', 'algorithm'),
    'all_reduce_bytes_per_pack': ('AllReduceConfig', 'bytes_per_pack'),
    'all_reduce_weight_factors': ('AllReduceConfig', 'weight_factors'),
    'prefetch_to_device': ('DevicePrefetch', 'to_device'),
    'per_replica_buffer_size': ('DevicePrefetch', 'buffer_size'),
    'eval_timeout_secs': ('WatchConfig', 'timeout_secs'),
    'graph_batch_size': ('ExportRequest', 'batch_size'),
    'is_training': ('ExportRequest', 'training_graph'),
    'parity_tolerance': ('ExportRequest', 'float_tolerance'),
    'benchmark_rounds': ('BenchmarkConfig', 'rounds'),
    'benchmark_steps': ('BenchmarkConfig', 'steps_per_round'),
    'benchmark_warmup_steps': ('BenchmarkConfig', 'warmup_steps'),
    'benchmark_json': ('BenchmarkConfig', 'json_path'),
}
# (class, field): why its flag's default differs in form, not in meaning.
CONVERTED = {
    ('EvaluationJob', 'top_k'): '--top_k=1,5 is a list of strings; the job takes (1, 5)',
    ('DataConfig', 'augmentation'): '--augmentation names the policy of the field\'s '
                                    'AugmentationConfig',
    ('TrainConfig', 'checkpoint_exclude_scopes'): 'an unset list is the empty tuple',
    ('TrainConfig', 'trainable_scopes'): 'the same',
    ('AveragingJob', 'checkpoint_prefixes'): 'the same',
    ('PredictionJob', 'image_files'): 'the same',
    ('ImportJob', 'seed'): 'the import\'s logits check draws its input with seed 0; '
                           'training\'s --seed is another flag of the same name',
    ('DeploymentPlan', 'replicas_to_aggregate'): 'a plan records what was resolved, '
                                                 'not a flag\'s default',
}


@pytest.fixture(scope='module')
def config_classes():
    """{class name: config dataclass} of every product package."""
    classes = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, f'{package}.'):
            for obj in vars(importlib.import_module(info.name)).values():
                if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
                    classes[obj.__name__] = obj
    return classes


def _fields_filled(flag_name, classes):
    """[(class name, field)] whose default the flag must have."""
    found = [(name, field) for name, config in classes.items()
             for field in dataclasses.fields(config) if field.name == flag_name]
    if flag_name in RENAMED:
        class_name, field_name = RENAMED[flag_name]
        found += [(class_name, field) for field in dataclasses.fields(classes[class_name])
                  if field.name == field_name]
    return [(name, field) for name, field in found
            if field.default is not dataclasses.MISSING and (name, field.name) not in CONVERTED]


@pytest.mark.parametrize('title', list(cli_flags.GROUPS))
def test_every_flag_has_its_config_fields_default(title, config_classes):
    values = flags.FlagValues()
    [(_, names)] = cli_flags.define([title], usage='U', flag_values=values)
    differing = [f'--{flag}: flag {values[flag].default!r}, {name}.{field.name} '
                 f'{field.default!r}'
                 for flag in names for name, field in _fields_filled(flag, config_classes)
                 if values[flag].default != field.default]
    assert not differing, differing


def test_every_renamed_and_converted_field_exists(config_classes):
    named = [*RENAMED.values(), *CONVERTED]
    missing = [f'{name}.{field}' for name, field in named
               if name not in config_classes
               or field not in {f.name for f in dataclasses.fields(config_classes[name])}]
    assert not missing, missing
