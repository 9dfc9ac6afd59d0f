"""Every shell block of README.md and docs/**/*.md runs, as written, on small data; and
the generated references are up to date.

Blocks: fences tagged sh, bash or shell. Each page runs in its own scratch directory,
its blocks in order with `bash -e`, `python` being this venv's. The directory looks
like the checkout to the commands (the four scripts, scripts/, benchmarks/, Makefile
and .venv linked; the packages imported from the checkout) and holds small data the
suite builds once:
  my_photos/<daisy|roses|tulips>/  60 small scenes each, separable by colour (JPEG, one
                                   PNG), new_photo.jpg
  disk/shapes/                     the `shapes` dataset, by download_and_convert_data.py
  disk/mnist/, cifar10/, flowers/   small copies of slim's datasets, as converted
  disk/checkpoints/                model-zoo checkpoints (slim's names, seeded values),
                                   written for the pages whose blocks use them

A marker on the line before a block changes how it runs:
  <!-- docs-test: skip (REASON) -->           not run (needs a GPU, a download, ...);
                                              counted and reported with its reason
  <!-- docs-test: slow -->                    run by `make test-slow` only
  <!-- docs-test: slow, timeout=SECONDS -->   a hard limit (default 180 s, slow 600 s)
  <!-- docs-test: steps=N -->                 keep up to N training steps (rule 2)
  <!-- docs-test: known-failing (REASON) -->  still run: fails the test, naming REASON,
                                              until the block passes; the page's later
                                              blocks run all the same
  <!-- docs-test: accuracy>=X -->              an outcome check: the block's last
                                              eval/Accuracy must be at least X. It holds
                                              in the slow run, where the page's blocks
                                              keep their documented step counts (rule 2
                                              does not apply); the fast run checks exit
                                              codes only
A marker that is not one of these, a ```console block, or a command line (python, make,
scripts/*.sh, sbatch) in a plain or ```text block fails the test.

Rewriting rules, applied to a block before it runs:
  1. Paths under /tmp/, /data/ and /shared/ move into the scratch directory's disk/
     (so /tmp/shapes is the fixture above).
  2. --max_number_of_steps=N becomes at most 4, or the marker's steps= (--warmup_epochs
     in the block shrinks by the same factor); a benchmark's --rounds=N becomes 1;
     --recompute_batch_norm_statistics=N at most 2.
  3. host:port addresses (10.0.0.1:2222) become 127.0.0.1 with a free port, the same
     port for the same address within a block; BASE_PORT (scripts/run_local_cluster.sh)
     is set to a free range.
  4. Lines from a "# on HOST" comment to the next one are one machine's commands: each
     machine's run in the background, and the block waits for all of them.

`make test` runs the fast blocks (test_page_fast), `make test-slow` the whole page again,
slow blocks included (test_page_slow). test_summary prints what ran and why the rest
did not: "docs test: N blocks run, M skipped: ...".
"""
import collections
import dataclasses
import re
import subprocess
import sys

import pytest
from helpers import docs_blocks
from helpers.docs_blocks import ROOT

PAGES = [ROOT / 'README.md', *sorted((ROOT / 'docs').rglob('*.md'))]
BLOCKS = {page: docs_blocks.extract(page) for page in PAGES}
RAN = collections.Counter()  # status -> blocks, in this pytest run


def _name(page):
    return str(page.relative_to(ROOT))


@pytest.fixture(scope='module')
def fixtures(tmp_path_factory):
    return docs_blocks.build_fixtures(tmp_path_factory.mktemp('docs_fixtures'))


def _run(page, include_slow, fixtures, tmp_path):
    docs_blocks.ensure_checkpoints(fixtures, [b for b in BLOCKS[page] if not b.skip and
                                              (include_slow or not b.slow)])
    scratch = docs_blocks.prepare_scratch(tmp_path / 'scratch', fixtures)
    outcomes = docs_blocks.run_page(BLOCKS[page], scratch, include_slow)
    for outcome in outcomes:
        RAN[outcome.status] += 1
        if outcome.status in ('passed', 'failed', 'timed out'):
            print(f'{outcome.block.where}: {outcome.status} in {outcome.seconds:.1f} s')
    bad = [o for o in outcomes if o.status in ('failed', 'timed out')]
    assert not bad, '\n\n'.join(docs_blocks.failure_report(o) for o in bad)
    known = [o.block.where for o in outcomes
             if o.block.known_failing and o.status == 'passed']
    if known:
        print(f'known-failing blocks now pass, drop their markers: {known}')


FAST_PAGES = [p for p in PAGES if any(not b.skip and not b.slow for b in BLOCKS[p])]
SLOW_PAGES = [p for p in PAGES if any(not b.skip and b.slow for b in BLOCKS[p])]


@pytest.mark.parametrize('page', FAST_PAGES, ids=_name)
def test_page_fast(page, fixtures, tmp_path):
    _run(page, False, fixtures, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize('page', SLOW_PAGES, ids=_name)
def test_page_slow(page, fixtures, tmp_path):
    _run(page, True, fixtures, tmp_path)


README = ROOT / 'README.md'
TOUR = '## A ten-minute tour'


def _tour_blocks():
    """README's tour: the blocks from its heading to the next one."""
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(TOUR)) + 1
    end = next(i for i, line in enumerate(lines[start:], start) if line.startswith('## '))
    return [b for b in BLOCKS[README] if start < b.line <= end]


# What the README tells a user to expect of the tour on classes that differ in texture.
TEXTURE_EXPECTATION = 'expect 0.5 or more'
TEXTURE_BAR = 0.5


def test_the_readme_states_the_texture_bar_the_slow_test_checks():
    assert TEXTURE_EXPECTATION in ' '.join(README.read_text().split())
    assert f'{TEXTURE_BAR:g}' in TEXTURE_EXPECTATION


@pytest.mark.slow
def test_readme_tour_on_photos_that_differ_in_texture(fixtures, tmp_path):
    """The tour as written, at its documented steps, on 4 classes that differ in texture
    only (stripes, dots, checks, gradients in random colours; 72 photos a class, 65
    trained on): its evaluation reaches what the README says to expect of such classes
    (TEXTURE_EXPECTATION), in place of the colour scenes' bar."""
    photos = tmp_path / 'textures'
    docs_blocks.write_photos(photos, per_class=72, textures=True)
    scratch = docs_blocks.prepare_scratch(tmp_path / 'scratch', fixtures, photos=photos)
    blocks = [dataclasses.replace(b, accuracy=TEXTURE_BAR) if b.accuracy is not None
              else b for b in _tour_blocks()]
    assert any(b.accuracy is not None for b in blocks)
    outcomes = docs_blocks.run_page(blocks, scratch, include_slow=True)
    for outcome in outcomes:
        print(f'{outcome.block.where}: {outcome.status} in {outcome.seconds:.1f} s')
    bad = [o for o in outcomes if o.status in ('failed', 'timed out')]
    assert not bad, '\n\n'.join(docs_blocks.failure_report(o) for o in bad)


# The generated references: each script's --check exits 1 when its file is stale.
@pytest.mark.parametrize('script', [
    'maintainer/flag_table.py', 'maintainer/floor_map.py',
    pytest.param('maintainer/model_table.py', marks=pytest.mark.slow)])  # builds 40 nets
def test_generated_reference_is_current(script):
    result = subprocess.run([sys.executable, str(ROOT / script), '--check'], cwd=ROOT,
                            capture_output=True, text=True, timeout=540)
    assert result.returncode == 0, (
        f'{script} --check failed: regenerate with `python {script}`.\n'
        f'{result.stdout[-2000:]}{result.stderr[-2000:]}')


def test_model_reference_lists_every_registered_net():
    """The cheap half of model_table.py --check, for make test: the model names."""
    from nets import nets_factory
    text = (ROOT / 'docs' / 'reference' / 'models.md').read_text()
    listed = re.findall(r'^\| `(\w+)` \|', text, re.M)
    assert listed == list(nets_factory.network_names()), (
        'docs/reference/models.md is stale: run `python maintainer/model_table.py`.')


def _anchors(page):
    """GitHub's anchors of a page's headings."""
    headings = re.findall(r'^#+\s+(.*)$', page.read_text(), re.M)
    return {re.sub(r'[^\w\- ]', '', h.lower()).replace(' ', '-') for h in headings}


def test_relative_links_point_to_files_and_headings():
    broken = []
    for page in PAGES:
        for target, anchor in re.findall(r'\]\(([^)#\s]*)(?:#([^)\s]*))?\)',
                                         page.read_text()):
            if re.match(r'\w+:', target):
                continue
            path = (page.parent / target) if target else page
            if not path.exists() or (anchor and anchor not in _anchors(path)):
                broken.append(f'{_name(page)}: {target}#{anchor}')
    assert not broken


def test_readme_is_short():
    assert len((ROOT / 'README.md').read_text().splitlines()) <= 250


# The runner itself.
def _write(tmp_path, text):
    page = tmp_path / 'page.md'
    page.write_text(text)
    return page


def test_a_broken_command_fails_the_runner(tmp_path):
    page = _write(tmp_path, 'Intro.\n\n```sh\necho fine\n```\n\n```bash\n'
                  'python train_image_classifier.py --no_such_flag=1\necho never\n```\n'
                  '\n```sh\necho not reached\n```\n')
    scratch = tmp_path / 'scratch'
    scratch.mkdir()
    outcomes = docs_blocks.run_page(docs_blocks.extract(page), scratch, False)
    assert [o.status for o in outcomes] == ['passed', 'failed', 'not run']
    assert 'never' not in outcomes[1].output
    report = docs_blocks.failure_report(outcomes[1])
    assert 'page.md:7 failed' in report and 'no_such_flag' in report


def test_a_block_over_its_timeout_fails(tmp_path):
    page = _write(tmp_path, '<!-- docs-test: timeout=1 -->\n```sh\nsleep 30 &\nwait\n```\n')
    outcomes = docs_blocks.run_page(docs_blocks.extract(page), tmp_path, False)
    assert outcomes[0].status == 'timed out' and outcomes[0].seconds < 10


def test_an_outcome_check_holds_at_the_documented_steps(tmp_path):
    page = _write(tmp_path, '```sh\necho "steps $(echo --max_number_of_steps=300)"\n```\n'
                  '<!-- docs-test: accuracy>=0.9 -->\n```sh\necho "eval/Accuracy: 0.95"\n'
                  'echo "eval/Accuracy: 0.5"\n```\n')
    blocks = docs_blocks.extract(page)
    assert blocks[1].accuracy == 0.9
    fast = docs_blocks.run_page(blocks, tmp_path, include_slow=False)
    assert [o.status for o in fast] == ['passed', 'passed']  # exit codes only
    assert 'max_number_of_steps=4' in fast[0].output
    slow = docs_blocks.run_page(blocks, tmp_path, include_slow=True)
    assert 'max_number_of_steps=300' in slow[0].output
    assert slow[1].status == 'failed'  # the last accuracy printed counts
    assert 'below the page\'s bar of 0.9' in slow[1].output


def test_markers(tmp_path):
    page = _write(tmp_path, '<!-- docs-test: skip (needs a GPU) -->\n```sh\nexit 1\n```\n'
                  '<!-- docs-test: slow, timeout=30, steps=50 -->\n```shell\nexit 1\n```\n'
                  '<!-- docs-test: known-failing (bug 7) -->\n```sh\nexit 3\n```\n'
                  '```python\nexit(1)\n```\n```text\nERROR: python is not run here\n```\n')
    skip, slow, known = docs_blocks.extract(page)
    assert (skip.skip, slow.slow, slow.timeout, slow.steps, known.known_failing) == (
        'needs a GPU', True, 30, 50, 'bug 7')
    assert '--max_number_of_steps=50 ' in docs_blocks.rewrite(
        '--max_number_of_steps=800 ', tmp_path, {}, slow.steps)
    outcomes = docs_blocks.run_page([skip, slow, known], tmp_path, False)
    assert [o.status for o in outcomes] == ['skipped', 'slow, not run', 'failed']
    after = docs_blocks.run_page([known, known], tmp_path, False)
    assert [o.status for o in after] == ['failed', 'failed']  # known-failing: goes on
    assert docs_blocks.failure_report(outcomes[2]).startswith('KNOWN-FAILING (bug 7)')


@pytest.mark.parametrize('text, message', [
    ('<!-- docs-test: skipp (typo) -->\n```sh\ntrue\n```\n', 'unknown docs-test marker'),
    ('<!-- docs-test: slow -->\n\nSome prose.\n```sh\ntrue\n```\n', 'not followed'),
    ('```\npython train_image_classifier.py --model_name=lenet\n```\n', 'would not be'),
    ('```console\n$ make demo\n```\n', 'console'),
])
def test_rule_breaking_docs_are_refused(tmp_path, text, message):
    with pytest.raises(docs_blocks.DocsError, match=message):
        docs_blocks.extract(_write(tmp_path, text))


def test_rewriting_rules(tmp_path):
    ports = {}
    text = docs_blocks.rewrite(
        'python t.py --train_dir=/tmp/x --max_number_of_steps=800 --rounds=7 \\\n'
        '    --worker_hosts=10.0.0.1:2222,10.0.0.2:2222 --dataset_dir=/data/flowers\n'
        '    --warmup_epochs=2 --recompute_batch_norm_statistics=20\n'
        'ls /tmp/x/../y $HOME/tmp/z\n', tmp_path, ports)
    disk = tmp_path / 'disk'
    assert f'--train_dir={disk}/x ' in text and f'--dataset_dir={disk}/flowers' in text
    assert '$HOME/tmp/z' in text and f'ls {disk}/x/../y' in text
    assert '--max_number_of_steps=4 ' in text and '--rounds=1 ' in text
    assert '--warmup_epochs=0.01 ' in text and '--recompute_batch_norm_statistics=2\n' in text
    assert text.count('127.0.0.1:') == 2 and len(set(ports.values())) == 2
    assert '10.0.0' not in text


def test_machines_run_side_by_side(tmp_path):
    page = _write(tmp_path, '```sh\nA=1\n# on 10.0.0.1\nsleep 1; echo one $A > one\n'
                  '# on 10.0.0.2\necho two > two\n```\n```sh\nfalse_start=1\n# on h1\n'
                  'exit 5\n# on h2\ntrue\n```\n')
    first, second = docs_blocks.extract(page)
    outcome = docs_blocks.run_block(first, tmp_path, {}, 0)
    assert outcome.status == 'passed' and outcome.seconds < 10
    assert (tmp_path / 'one').read_text() == 'one 1\n' and (tmp_path / 'two').exists()
    assert docs_blocks.run_block(second, tmp_path, {}, 1).status == 'failed'


def _summary():
    blocks = [b for page in PAGES for b in BLOCKS[page]]
    reasons = collections.Counter(b.skip for b in blocks if b.skip)
    return (f'docs test: {RAN["passed"]} blocks run and passed, '
            f'{RAN["failed"] + RAN["timed out"]} failed, {RAN["not run"]} not reached; '
            f'of {len(blocks)} blocks in {len(PAGES)} pages, '
            f'{sum(not b.skip and not b.slow for b in blocks)} fast, '
            f'{sum(b.slow and not b.skip for b in blocks)} slow (make test-slow), '
            f'{len([b for b in blocks if b.skip])} skipped: '
            + '; '.join(f'{n} x {r}' for r, n in reasons.most_common())
            + f'. Outcome checks (eval/Accuracy at the documented steps, slow run): '
            f'{", ".join(_outcome_checks(blocks)) or "none"}; every other block checks its '
            f'exit code only.')


def _outcome_checks(blocks):
    return [f'{b.where} >= {b.accuracy}' for b in blocks if b.accuracy is not None]


def _report(request):
    # Printed by tests/e2e/conftest.py after the run: output written during a test is
    # captured, whatever the verbosity.
    request.config.stash[docs_blocks.SUMMARY] = _summary()


def test_summary(request):
    """Last in the module: records what ran, for the summary at the end of the run."""
    _report(request)


@pytest.mark.slow
def test_summary_slow(request):
    _report(request)
