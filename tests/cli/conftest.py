"""Each script's flags in a FlagValues of their own, as the script defines them (absl's
global FLAGS would clash across scripts)."""
import pathlib

import pytest
from absl import flags

from cli import flags as cli_flags

ROOT = pathlib.Path(cli_flags.__file__).resolve().parent.parent


@pytest.fixture
def script_flags():
    """script_flags(script) -> (FlagValues, sections) of the script's FLAG_GROUPS."""
    def define(script):
        values = flags.FlagValues()
        sections = cli_flags.define(cli_flags.declared_groups(ROOT / script),
                                    usage='USAGE', flag_values=values)
        return values, sections
    return define


@pytest.fixture
def parsed(script_flags):
    """parsed(script, *args) -> the script's FlagValues, parsed from args."""
    def parse(script, *args):
        values, _ = script_flags(script)
        values([script, *args])
        return values
    return parse
