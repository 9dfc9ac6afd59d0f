"""Every flag defined once, with one meaning in every script taking it, and each
script's --help listing its flags by topic."""
import collections
import itertools
import json
import pathlib
import re

import pytest
from absl import flags

from cli import configs, flag_help
from cli import flags as cli_flags
from core.errors import UsageError
from helpers.scripts import run_script

ROOT = pathlib.Path(cli_flags.__file__).resolve().parent.parent
TRAIN, _, EXPORT, CONVERT = cli_flags.SCRIPTS

HELP_FLAGS = {'help', 'helpshort', '?'}
ENTRY = re.compile(r'^  (?:-\S,)?--(?:\[no\])?(\w+):')


def test_every_flag_is_defined_once_in_one_group():
    groups_of = collections.defaultdict(list)
    for title in cli_flags.GROUPS:
        values = flags.FlagValues()
        [(_, names)] = cli_flags.define([title], flag_values=values)
        assert names, title
        for name in names:
            if not flag_help.is_alias(values[name]):
                groups_of[name].append(title)
    assert {name: titles for name, titles in groups_of.items() if len(titles) > 1} == {}


def _scripts_and_cli_modules():
    """Every script and tool (benchmarks/ aside: maintainers' comparisons with flags of their
    own) and every cli module but the two that call absl's DEFINE_*."""
    paths = [*ROOT.glob('*.py'), *(ROOT / 'scripts').glob('*.py'),
             *(ROOT / 'maintainer').glob('*.py'), *(ROOT / 'cli').rglob('*.py')]
    return sorted(str(p.relative_to(ROOT)) for p in paths
                  if str(p.relative_to(ROOT)) not in ('cli/flags.py', 'cli/flag_help.py'))


@pytest.mark.parametrize('path', _scripts_and_cli_modules())
def test_no_flag_is_defined_outside_cli_flags(path):
    assert not re.search(r'\bDEFINE_\w+\(', (ROOT / path).read_text())


def _help_sections(text):
    """[(title, [flag name, ...])] of a --help text (its usage lists no flags)."""
    sections = []
    for line in text.splitlines():
        if line and not line.startswith(' ') and line.endswith(':'):
            sections.append((line[:-1], []))
        elif sections and ENTRY.match(line):
            sections[-1][1].append(ENTRY.match(line).group(1))
    return [(title, names) for title, names in sections if names]


@pytest.mark.parametrize('script', cli_flags.SCRIPTS + cli_flags.TOOLKIT_SCRIPTS)
def test_help_lists_the_scripts_flags_by_topic(script, script_flags, capsys):
    values, sections = script_flags(script)
    with pytest.raises(SystemExit) as exited:
        values([script, '--help'])
    assert exited.value.code == 0  # help asked for and given: success
    text = capsys.readouterr().out
    assert text.startswith('USAGE\n')
    listed = _help_sections(text)
    assert listed[:-1] == sections
    assert listed[-1][0].startswith('absl')
    assert {'flagfile', 'help'} <= set(listed[-1][1])
    in_groups = {name for _, names in sections for name in names}
    assert in_groups == set(values) - HELP_FLAGS


def test_the_scripts_help_and_helpfull():
    """The real scripts: --help by topic, absl's --helpfull by module still there."""
    grouped = run_script(CONVERT, '--help')
    assert grouped.returncode == 0 and 'Traceback' not in grouped.stderr, grouped.stderr
    assert [title for title, _ in _help_sections(grouped.stdout)][:4] == [
        'Dataset', 'Conversion', 'Existing output', 'Logging']
    full = run_script(TRAIN, '--helpfull')
    assert full.returncode == 0 and 'Traceback' not in full.stderr, full.stderr
    assert 'absl.logging:' in full.stdout and '--model_name' in full.stdout


@pytest.mark.parametrize('flag', ['graph_batch_size', 'batch_size'])
def test_export_batch_flags_reach_the_export_request(flag, parsed, tmp_path):
    values = parsed(EXPORT, f'--{flag}=4', f'--export_dir={tmp_path}',
                    '--model_name=lenet', '--dataset_name=shapes')
    assert configs.export_from_flags(values).request.batch_size == 4
    bad = parsed(EXPORT, f'--{flag}=0', f'--export_dir={tmp_path}')
    with pytest.raises(UsageError, match=f'--{flag}=0 is out of range'):
        configs.export_from_flags(bad)


def test_a_flag_several_scripts_take_means_the_same_in_each(script_flags):
    by_script = {script: script_flags(script)[0] for script in cli_flags.SCRIPTS}
    differing = set()
    for a, b in itertools.combinations(cli_flags.SCRIPTS, 2):
        for name in (set(by_script[a]) & set(by_script[b])) - HELP_FLAGS:
            flag_a, flag_b = by_script[a][name], by_script[b][name]
            if ((flag_a.help, flag_a.default, flag_a.flag_type())
                    != (flag_b.help, flag_b.default, flag_b.flag_type())):
                differing.add(name)
    # TF-Slim's export --batch_size, kept as an alias of --graph_batch_size.
    assert differing == {'batch_size'}
    alias = by_script[EXPORT]['batch_size']
    assert flag_help.is_alias(alias) and 'TF-Slim\'s name for --graph_batch_size' in alias.help


def test_a_script_declares_only_known_groups():
    with pytest.raises(ValueError, match='No flag group Modle'):
        cli_flags.define(['Modle'], flag_values=flags.FlagValues())


@pytest.mark.parametrize('script', cli_flags.SCRIPTS)
def test_every_flag_of_slims_script_of_the_same_name_is_accepted(script, script_flags,
                                                                  test_data_dir):
    """A TF-Slim command line runs unchanged: no flag of slim's script is unknown here."""
    slim = json.loads((test_data_dir / 'slim_reference' / 'script_flags.json').read_text())
    values, _ = script_flags(script)
    assert slim[script] and [name for name in slim[script] if name not in values] == []
