"""Imports only go down: command line -> training and export -> deployment -> nets,
datasets, preprocessing -> core; inside training, its sub-packages have floors of their
own. Checked on the source (function-local imports included), so no import is missed."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Package -> floor. A module may import from its own package and from lower floors.
FLOORS = {'core': 0, 'nets': 1, 'datasets': 1, 'preprocessing': 1, 'deployment': 2,
          'training': 3, 'export': 3, 'cli': 4}
SCRIPTS_FLOOR = 5  # the top-level scripts, scripts/, maintainer/ and benchmarks/
# Sub-package -> floor inside a package: a module may import from its own sub-package
# and from lower ones.
SUBFLOORS = {'training': {'checkpoints': 0, 'summaries': 0, 'recipes': 1, 'loop': 2,
                          'evaluation': 2, 'benchmark': 3}}


def _project_imports(path: pathlib.Path, depth: int = 1):
    """(line, package) for every import of a project package in the file; with depth 2,
    the package is 'package.sub-package' where it has sub-packages."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # 'from training import loop' imports the sub-package training.loop.
            names = ([f'{node.module}.{alias.name}' for alias in node.names]
                     if node.module in SUBFLOORS else [node.module])
        else:
            continue
        for name in names:
            parts = name.split('.')
            if parts[0] in FLOORS:
                yield node.lineno, '.'.join(parts[:depth if parts[0] in SUBFLOORS else 1])


def _sources():
    for package in FLOORS:
        for path in sorted((ROOT / package).rglob('*.py')):
            yield path, package, FLOORS[package]
    for path in [*sorted(ROOT.glob('*.py')), *sorted((ROOT / 'scripts').glob('*.py')),
                 *sorted((ROOT / 'maintainer').glob('*.py')),
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


def _sub_package_sources():
    for package, floors in SUBFLOORS.items():
        for path in sorted((ROOT / package).rglob('*.py')):
            relative = path.relative_to(ROOT / package)
            yield path, package, relative.parts[0] if len(relative.parts) > 1 else None


def test_every_sub_package_has_a_floor():
    for package, floors in SUBFLOORS.items():
        found = {p.parent.name for p in (ROOT / package).glob('*/__init__.py')}
        assert found == set(floors), package


@pytest.mark.parametrize('path, package, sub',
                         [pytest.param(*s, id=str(s[0].relative_to(ROOT)))
                          for s in _sub_package_sources()])
def test_imports_inside_a_package_only_go_down(path, package, sub):
    floors = SUBFLOORS[package]
    if sub is None:
        assert path.name == '__init__.py', (f'{path.relative_to(ROOT)}: every module of '
                                            f'{package}/ lives in a sub-package')
        return
    upward = [f'line {line}: {imported}'
              for line, imported in _project_imports(path, depth=2)
              if imported.startswith(package + '.') and imported != f'{package}.{sub}'
              and floors[imported.split('.')[1]] >= floors[sub]]
    assert not upward, (f'{path.relative_to(ROOT)} ({package}/{sub}, floor {floors[sub]}) '
                        f'imports up or across: {upward}')


def test_the_check_sees_every_import_form(tmp_path):
    source = tmp_path / 'module.py'
    source.write_text('import os\nimport cli.jobs\nfrom training import train_loop\n'
                      'from . import sibling\n\ndef f():\n    from deployment import runners\n')
    assert list(_project_imports(source)) == [(2, 'cli'), (3, 'training'), (7, 'deployment')]
    source.write_text('from training.loop import trainer\nimport training.recipes.losses\n'
                      'def f():\n    from training import checkpoints\n')
    assert list(_project_imports(source, depth=2)) == [
        (1, 'training.loop'), (2, 'training.recipes'), (4, 'training.checkpoints')]
