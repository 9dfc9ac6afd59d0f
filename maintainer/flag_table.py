r"""Writes docs/reference/flags.md: each script's flags by topic, as its --help lists them.

  python maintainer/flag_table.py           # writes it
  python maintainer/flag_table.py --check   # exit 1 (naming the command above) if stale
"""
import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from absl import flags  # noqa: E402

from cli import flag_help  # noqa: E402
from cli import flags as cli_flags  # noqa: E402

OUTPUT = os.path.join('docs', 'reference', 'flags.md')
COMMAND = 'python maintainer/flag_table.py'


def _default(flag) -> str:
    if flag.default in (None, '', []) or flag_help.is_alias(flag):
        return ''
    if flag.boolean:
        return '`true`' if flag.default else '`false`'
    return f'`{flag.serializer.serialize(flag.default)}`'


def _section(script: str) -> list:
    path = os.path.join(ROOT, script)
    with open(path) as f:
        summary = ast.get_docstring(ast.parse(f.read())).splitlines()[0]
    values = flags.FlagValues()  # each script's own: two scripts' flags would clash
    lines = [f'## {script}', '', summary]
    for title, names in cli_flags.define(cli_flags.declared_groups(path),
                                         flag_values=values):
        lines += ['', f'### {title}', '', '| flag | default | meaning |', '|---|---|---|']
        for name in names:
            flag = values[name]
            meaning = (' '.join(flag.help.split()).replace('|', '\\|')
                       .replace('<', '&lt;'))  # not an HTML tag: tfds:<name>
            lines.append(f'| `--{name}` | {_default(flag)} | {meaning} |')
    return lines + ['']


def render() -> str:
    lines = ['# Flags', '',
             f'Generated from `cli/flag_groups/` by `{COMMAND}`; edit the flags there, not '
             'this file.', '',
             'Each script\'s flags, by topic as its `--help` lists them. Every script '
             'also takes absl\'s `--flagfile`, `--help`, `--helpfull`, `--verbosity` and '
             '`--log_dir`; `--helpfull` lists all of absl\'s flags.', '']
    for script in cli_flags.SCRIPTS + cli_flags.TOOLKIT_SCRIPTS:
        lines += _section(script)
    return '\n'.join(lines)


def main(argv) -> int:
    if argv[1:] not in ([], ['--check']):
        sys.stderr.write(__doc__)
        return 2
    text = render()
    path = os.path.join(ROOT, OUTPUT)
    if argv[1:] == ['--check']:
        current = open(path).read() if os.path.exists(path) else None
        if current != text:
            sys.stderr.write(f'{OUTPUT} is out of date with cli/flag_groups/; run: '
                             f'{COMMAND}\n')
            return 1
        return 0
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)
    print(f'Wrote {OUTPUT}.')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
