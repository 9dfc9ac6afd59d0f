"""Every flag of the scripts, each defined once, with one meaning, in topic groups.

A script names the groups it takes in FLAG_GROUPS and calls define(FLAG_GROUPS,
__doc__); its --help then lists its flags by topic (cli.flag_help), and cli.configs
turns the parsed flags into the frozen configs its job takes. Library code never reads
FLAGS. A name means the same in every script that takes it: where TF-Slim gave one
name two meanings, the second has its own name and slim's name stays as an alias.
The groups are in cli.flag_groups (GROUPS), one idiom for all: a flag filling a config
dataclass field takes its default from the field.
"""
import ast
import functools
import pathlib

from absl import flags

from cli import flag_help
from cli.flag_groups import GROUPS

SCRIPTS = ('train_image_classifier.py', 'eval_image_classifier.py',
           'export_inference_graph.py', 'download_and_convert_data.py')
# Scripts TF-Slim did not have; their flags follow the same rules.
TOOLKIT_SCRIPTS = ('average_checkpoints.py', 'recompute_batch_norm_statistics.py',
                   'import_keras_weights.py', 'import_timm_weights.py',
                   'predict_image_classifier.py')

# The flags below are defined on behalf of the script calling define(): absl files them
# under that script, so its --helpfull and its flags.txt (cli.run_record) list them.
flags.disclaim_key_flags()


class Define:
    """absl's DEFINE_* functions, into one FlagValues: what a group definer is given."""

    def __init__(self, flag_values: flags.FlagValues):
        self.flag_values = flag_values
        for kind in ('string', 'integer', 'float', 'bool', 'enum', 'list'):
            setattr(self, kind, functools.partial(getattr(flags, f'DEFINE_{kind}'),
                                                  flag_values=flag_values))

    def alias(self, name: str, original: str, help_text: str):
        flags.DEFINE_alias(name, original, flag_values=self.flag_values)
        self.flag_values[name].help = help_text


def define(group_titles, usage: str = None, flag_values: flags.FlagValues = flags.FLAGS):
    """Defines the flags of the named groups and a --help listing them by topic, after
    usage; returns the sections [(title, [flag name, ...])] in that order."""
    unknown = [title for title in group_titles if title not in GROUPS]
    if unknown:
        raise ValueError(f'No flag group {", ".join(unknown)}; the groups are '
                         f'{", ".join(GROUPS)}.')
    sections = []
    for title in group_titles:
        before = set(flag_values)
        GROUPS[title](Define(flag_values))
        sections.append((title, [name for name in flag_values if name not in before]))
    flag_help.install(sections, usage, flag_values)
    return sections


def declared_groups(script_path) -> tuple:
    """The FLAG_GROUPS a script declares, read from its source without running it:
    importing two scripts would define both's flags into absl's one global FLAGS."""
    tree = ast.parse(pathlib.Path(script_path).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                getattr(target, 'id', None) == 'FLAG_GROUPS' for target in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise ValueError(f'{script_path} declares no FLAG_GROUPS.')
