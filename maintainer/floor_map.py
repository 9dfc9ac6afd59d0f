r"""Writes the floor map of docs/architecture.md: every package on its floor, with its
modules, from the FLOORS table that tests/test_layering.py enforces.

  python maintainer/floor_map.py            # rewrites the map between its markers
  python maintainer/floor_map.py --check    # exit 1 when the map is stale
"""
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAYERING = ROOT / 'tests' / 'test_layering.py'
PAGE = ROOT / 'docs' / 'architecture.md'
BEGIN = ('<!-- floor map: written by maintainer/floor_map.py from FLOORS in '
         'tests/test_layering.py; do not edit by hand -->')
END = '<!-- end of floor map -->'


def _constants():
    """FLOORS and SCRIPTS_FLOOR as tests/test_layering.py assigns them (read, not
    imported: the test module needs pytest)."""
    found = {}
    for node in ast.parse(LAYERING.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ('FLOORS', 'SCRIPTS_FLOOR', 'SUBFLOORS'):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found['FLOORS'], found['SCRIPTS_FLOOR'], found['SUBFLOORS']


def _modules(package):
    """The package's modules, sub-packages' as 'sub/module'."""
    directory = ROOT / package.replace('.', '/')
    return [str(p.relative_to(directory).with_suffix('')) for p in
            sorted(directory.rglob('*.py')) if p.name != '__init__.py']


def floor_map():
    floors, scripts_floor, subfloors = _constants()
    rows = ['| floor | package | modules |', '|---|---|---|']
    scripts = ([p.name for p in sorted(ROOT.glob('*.py'))]
               + [f'scripts/{p.name}' for p in sorted((ROOT / 'scripts').glob('*.py'))]
               + [f'maintainer/{p.name}' for p in sorted((ROOT / 'maintainer').glob('*.py'))]
               + [f'benchmarks/{p.name}' for p in sorted((ROOT / 'benchmarks').glob('*.py'))])
    rows.append(f'| {scripts_floor} | the scripts | '
                + ', '.join(f'`{s}`' for s in scripts) + ' |')
    for package, floor in sorted(floors.items(), key=lambda item: (-item[1], item[0])):
        # A package with sub-packages: one row each, floor.sub-floor ('3.2').
        subs = sorted(subfloors.get(package, {}).items(), key=lambda item: (-item[1], item[0]))
        for name, row_floor in ([(f'{package}/{sub}', f'{floor}.{sub_floor}')
                                 for sub, sub_floor in subs] or [(package, floor)]):
            rows.append(f'| {row_floor} | `{name}/` | '
                        + ', '.join(f'`{m}`' for m in _modules(name)) + ' |')
    return '\n'.join(rows)


def updated(text):
    """The page's text with the map between its markers replaced."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f'{PAGE.relative_to(ROOT)} lacks the floor map markers:\n'
                         f'{BEGIN}\n{END}')
    return text[:start] + BEGIN + '\n' + floor_map() + '\n' + text[end:]


def main(argv):
    text = PAGE.read_text()
    new = updated(text)
    if '--check' in argv[1:]:
        if new != text:
            print(f'{PAGE.relative_to(ROOT)}: the floor map is stale; run '
                  f'`python maintainer/floor_map.py`.', file=sys.stderr)
            return 1
        return 0
    if new != text:
        PAGE.write_text(new)
        print(f'Wrote the floor map of {PAGE.relative_to(ROOT)}.')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
