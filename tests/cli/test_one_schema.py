"""One schema: a flag named as a config dataclass field has that field's default, in every
script and tool. The exceptions are fields the flag reaches through a conversion (a
list to a tuple, a flag's unset to an empty tuple), named here with why."""
import dataclasses
import importlib
import inspect
import pkgutil

import pytest
from absl import flags

from cli import flags as cli_flags
from helpers.docs_blocks import ROOT

PACKAGES = ('cli', 'core', 'datasets', 'deployment', 'export', 'nets', 'preprocessing',
            'training')
# (class, field): why its flag's default differs in form, not in meaning.
CONVERTED = {
    ('TrainingJob', 'benchmark'): '--benchmark=False is the job\'s None (no benchmark)',
    ('EvaluationJob', 'benchmark'): 'the same',
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


def _config_classes():
    classes = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, f'{package}.'):
            for obj in vars(importlib.import_module(info.name)).values():
                if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
                    classes[obj.__name__] = obj
    return classes


@pytest.mark.parametrize('script', cli_flags.SCRIPTS + cli_flags.TOOLKIT_SCRIPTS)
def test_every_flag_has_its_config_fields_default(script):
    values = flags.FlagValues()
    cli_flags.define(cli_flags.declared_groups(ROOT / script), usage='U', flag_values=values)
    differing = [f'--{field.name}: flag {values[field.name].default!r}, '
                 f'{name}.{field.name} {field.default!r}'
                 for name, config in _config_classes().items()
                 for field in dataclasses.fields(config)
                 if field.name in values and field.default is not dataclasses.MISSING
                 and (name, field.name) not in CONVERTED
                 and values[field.name].default != field.default]
    assert not differing, differing
