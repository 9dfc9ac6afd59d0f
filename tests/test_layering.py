"""Imports only go down: command line -> training and export -> deployment -> nets,
datasets, preprocessing -> core. Checked on the source, so no import is missed."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Package -> floor. A module may import from its own package and from lower floors.
FLOORS = {'core': 0, 'nets': 1, 'datasets': 1, 'preprocessing': 1, 'deployment': 2,
          'training': 3, 'export': 3, 'cli': 4}
SCRIPTS_FLOOR = 5  # the top-level scripts and scripts/


def _project_imports(path: pathlib.Path):
    """(line, package) for every import of a project package in the file."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            package = name.split('.')[0]
            if package in FLOORS:
                yield node.lineno, package


def _sources():
    for package in FLOORS:
        for path in sorted((ROOT / package).rglob('*.py')):
            yield path, package, FLOORS[package]
    for path in [*sorted(ROOT.glob('*.py')), *sorted((ROOT / 'scripts').glob('*.py')),
                 *sorted((ROOT / 'benchmarks').glob('*.py'))]:
        yield path, None, SCRIPTS_FLOOR


def test_every_package_has_a_floor():
    packages = {p.parent.name for p in ROOT.glob('*/__init__.py')}
    assert packages == set(FLOORS)


@pytest.mark.parametrize('path, package, floor',
                         [pytest.param(*s, id=str(s[0].relative_to(ROOT))) for s in _sources()])
def test_imports_only_go_down(path, package, floor):
    upward = [f'line {line}: {imported} (floor {FLOORS[imported]})'
              for line, imported in _project_imports(path)
              if imported != package and FLOORS[imported] >= floor]
    assert not upward, f'{path.relative_to(ROOT)} (floor {floor}) imports up or across: {upward}'


def test_the_check_sees_every_import_form(tmp_path):
    source = tmp_path / 'module.py'
    source.write_text('import os\nimport cli.jobs\nfrom training import train_loop\n'
                      'from . import sibling\n\ndef f():\n    from deployment import runners\n')
    assert list(_project_imports(source)) == [(2, 'cli'), (3, 'training'), (7, 'deployment')]
