"""A script's --help: its usage, then its flags by topic, as cli.flags groups them.

absl's own --help lists the main module's flags in one alphabetical block; ours walks
the groups the script declared, then shows the few absl flags a user needs. absl's
--helpfull (every flag, by defining module) keeps its text. Asking for help succeeds:
each exits 0 (absl's exit 1).
"""
import sys

from absl import app, flags

# absl's flags worth a line in --help; --helpfull shows the rest.
ABSL_FLAGS = ('help', 'helpfull', 'verbosity', 'log_dir')
_FLAGFILE = ('--flagfile: Read further flags from this file, one --name=value a line '
             '(a train_dir\'s flags.txt repeats its run).')


def is_alias(flag) -> bool:
    """Whether absl's DEFINE_alias made the flag (it has no value of its own)."""
    return type(flag).__name__ == '_FlagAlias'


def _entry(flag, prefix: str = '  ') -> str:
    """One flag as absl's help shows it: name and help, then its default and type."""
    name = ('--[no]' if flag.boolean else '--') + flag.name
    if flag.short_name:
        name = f'-{flag.short_name},{name}'
    lines = [flags.text_wrap(f'{name}: {flag.help or ""}', indent=prefix + '  ',
                             firstline_indent=prefix)]
    if not is_alias(flag):
        if flag.default_as_str:
            lines.append(flags.text_wrap(f'(default: {flag.default_as_str})',
                                         indent=prefix + '  '))
        if flag.parser.syntactic_help:
            lines.append(flags.text_wrap(f'({flag.parser.syntactic_help})',
                                         indent=prefix + '  '))
    return '\n'.join(lines)


def render(sections, flag_values: flags.FlagValues) -> str:
    """The flags of sections ([(group title, [flag name, ...])]), a block per group,
    then absl's few."""
    blocks = [f'{title}:\n' + '\n'.join(_entry(flag_values[name]) for name in names)
              for title, names in sections]
    absl_entries = [flags.text_wrap(_FLAGFILE, indent='    ', firstline_indent='  ')]
    for name in ABSL_FLAGS:  # absl defines its own in the global FLAGS
        source = flag_values if name in flag_values else flags.FLAGS
        if name in source:
            absl_entries.append(_entry(source[name]))
    blocks.append('absl (--helpfull lists all its flags):\n' + '\n'.join(absl_entries))
    return '\n\n'.join(blocks) + '\n'


class _GroupedHelpFlag(app.HelpFlag):
    """--help (and -?): the usage and the flags by topic, on stdout; exits 0 (absl's
    exits 1, as if asking for help were a failure)."""

    def __init__(self, sections, usage, flag_values):
        super().__init__()
        self.help = 'Show this help: the script\'s flags by topic.'
        self.allow_override = True  # replaces absl's --help
        self._sections, self._usage, self._flag_values = sections, usage, flag_values

    def parse(self, arg):
        if self._parse(arg):
            usage = self._usage or sys.modules['__main__'].__doc__ or ''
            sys.stdout.write(usage.rstrip('\n') + '\n\n'
                             + render(self._sections, self._flag_values))
            print('\nTry --helpfull to get a list of all flags.')
            sys.exit(0)


class _GroupedHelpshortFlag(_GroupedHelpFlag):
    """--helpshort, absl's other name for --help."""
    NAME = 'helpshort'
    SHORT_NAME = None


class _HelpfullFlag(app.HelpfullFlag):
    """absl's --helpfull (every flag, by defining module), exiting 0."""

    def __init__(self):
        super().__init__()
        self.allow_override = True  # replaces absl's

    def parse(self, arg):
        if self._parse(arg):
            app.usage(writeto_stdout=True)
            sys.exit(0)


def install(sections, usage, flag_values: flags.FlagValues):
    """Makes --help, -? and --helpshort print sections; --helpfull stays absl's. Each
    exits 0."""
    if flag_values is flags.FLAGS:
        app.define_help_flags()  # absl's help flags first, so ours replace them
        flags.DEFINE_flag(_HelpfullFlag(), flag_values, module_name=__name__)
    for help_flag in (_GroupedHelpFlag, _GroupedHelpshortFlag):
        flags.DEFINE_flag(help_flag(sections, usage, flag_values), flag_values,
                          module_name=__name__)
