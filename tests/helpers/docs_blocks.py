"""The shell blocks of README.md and docs/: found, scaled down, and run in a scratch
directory. tests/e2e/test_docs.py uses it; its docstring lists the markers and rules."""
import dataclasses
import os
import pathlib
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from helpers import slim_fixtures

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SHELL_LANGUAGES = {'sh', 'bash', 'shell'}
# Fences whose commands would escape the test: a command belongs in a shell block.
PLAIN_LANGUAGES = {'', 'text'}
COMMAND_LINE = re.compile(r'^\s*(python3?|\.venv/bin/python|make|scripts/\S+\.sh|sbatch)\s')
FENCE = re.compile(r'^(\s*)(```+)\s*([\w+-]*)\s*$')
MARKER = re.compile(r'^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$')
MARKER_PART = re.compile(
    r'\s*(?:(?P<kind>skip|known-failing)\s*\((?P<reason>[^()]+)\)|(?P<slow>slow)'
    r'|timeout=(?P<timeout>\d+)|steps=(?P<steps>\d+)|accuracy>=(?P<accuracy>[\d.]+))'
    r'\s*(?:,|$)')
ACCURACY = re.compile(r'eval/Accuracy: ([\d.]+)')
MACHINE = re.compile(r'^\s*#\s*on\s+\S+')
FEW_STEPS = 4
FAST_TIMEOUT = 180
SLOW_TIMEOUT = 600
# What a scratch directory links from the checkout: what the docs' commands run. The
# packages are not linked (a block could write into them); they are imported from the
# checkout (PYTHONPATH).
LINKED = ('*.py', 'Makefile', 'requirements*.txt', 'scripts', 'benchmarks', '.venv')
# The docs test's one-line summary, kept for the end of the run (tests/e2e/conftest.py).
SUMMARY = pytest.StashKey[str]()
# Where absolute example paths (/tmp/..., /data/..., /shared/...) land in it.
DISK = 'disk'


@dataclasses.dataclass
class Block:
    path: pathlib.Path
    line: int  # of the opening fence, 1-based
    text: str
    skip: str | None = None  # the reason
    known_failing: str | None = None  # the reason; the block still runs
    slow: bool = False
    timeout: int | None = None
    steps: int = FEW_STEPS  # the most --max_number_of_steps it keeps
    # The outcome its output must show: eval/Accuracy at least this (slow runs only).
    accuracy: float | None = None

    @property
    def where(self):
        try:
            return f'{self.path.relative_to(ROOT)}:{self.line}'
        except ValueError:
            return f'{self.path}:{self.line}'


@dataclasses.dataclass
class Outcome:
    block: Block
    status: str  # 'passed', 'failed', 'timed out', 'skipped', 'slow, not run'
    seconds: float = 0.0
    output: str = ''
    script: str = ''


class DocsError(ValueError):
    """A doc breaks the rules (an unknown marker, a command outside a shell block)."""


def parse_marker(text, where):
    """{'skip': reason, 'known_failing': reason, 'slow': bool, 'timeout': int,
    'steps': int}."""
    found = {}
    position = 0
    while position < len(text):
        match = MARKER_PART.match(text, position)
        if not match or match.end() == position:
            raise DocsError(f'{where}: unknown docs-test marker {text!r}; use "skip '
                            f'(reason)", "slow", "timeout=SECONDS", "steps=N" or '
                            f'"known-failing (reason)", "accuracy>=X".')
        if match['kind']:
            found[match['kind'].replace('-', '_')] = match['reason'].strip()
        elif match['slow']:
            found['slow'] = True
        elif match['timeout']:
            found['timeout'] = int(match['timeout'])
        elif match['accuracy']:
            found['accuracy'] = float(match['accuracy'])
        else:
            found['steps'] = int(match['steps'])
        position = match.end()
    return found


def extract(path):
    """Every shell block of a markdown file, with the marker on the line before it."""
    path = pathlib.Path(path)
    lines = path.read_text().splitlines()
    blocks, marker, marker_line = [], None, 0
    index = 0
    while index < len(lines):
        line = lines[index]
        where = f'{path}:{index + 1}'
        marker_match = MARKER.match(line)
        fence = FENCE.match(line)
        if marker_match:
            if marker is not None:
                raise DocsError(f'{path}:{marker_line}: docs-test marker not followed by '
                                f'a shell block.')
            marker, marker_line = parse_marker(marker_match[1], where), index + 1
        elif fence:
            indent, ticks, language = fence.groups()
            fence_line = index + 1
            body = []
            index += 1
            while index < len(lines) and not (lines[index].strip().startswith(ticks)
                                              and not lines[index].strip().strip('`')):
                body.append(lines[index][len(indent):] if lines[index].startswith(indent)
                            else lines[index].lstrip())
                index += 1
            language = language.lower()
            if language in SHELL_LANGUAGES:
                options = marker or {}
                blocks.append(Block(path, fence_line, '\n'.join(body) + '\n',
                                    skip=options.get('skip'),
                                    known_failing=options.get('known_failing'),
                                    slow=options.get('slow', False),
                                    timeout=options.get('timeout'),
                                    steps=options.get('steps', FEW_STEPS),
                                    accuracy=options.get('accuracy')))
            else:
                if marker is not None:
                    raise DocsError(f'{path}:{marker_line}: docs-test marker before a '
                                    f'```{language} block; markers go before shell blocks.')
                if language == 'console':
                    raise DocsError(f'{where}: ```console blocks are not run; write the '
                                    f'commands in a ```sh block.')
                commands = [b for b in body if COMMAND_LINE.match(b)]
                if language in PLAIN_LANGUAGES and commands:
                    raise DocsError(f'{where}: a command in a ```{language} block '
                                    f'({commands[0].strip()!r}) would not be tested; put '
                                    f'it in a ```sh block.')
            marker = None
        elif marker is not None and line.strip():
            raise DocsError(f'{path}:{marker_line}: docs-test marker not followed by a '
                            f'shell block.')
        index += 1
    if marker is not None:
        raise DocsError(f'{path}:{marker_line}: docs-test marker not followed by a shell '
                        f'block.')
    return blocks


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def free_port_range(count=16):
    """The first of `count` consecutive free ports (scripts/run_local_cluster.sh's
    BASE_PORT)."""
    rng = random.Random()
    for _ in range(200):
        first = rng.randrange(20000, 40000)
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(('127.0.0.1', port))
            return first
        except OSError:
            continue
    raise RuntimeError('no range of free ports')


def rewrite(text, scratch, ports, steps=FEW_STEPS):
    """The block as the test runs it (the rules of tests/e2e/test_docs.py).
    `ports` maps example host:port -> local port, filled as addresses are met."""
    # 1. Example places on disk -> the scratch directory's disk/.
    text = re.sub(r'(?<![\w.~/$-])/(?:tmp|data|shared)(?=/)',
                  str(pathlib.Path(scratch) / DISK), text)
    # 2. Long trainings -> a few steps, their warmup shrunk alike; benchmarks -> one round.
    steps_flag = re.search(r'--max_number_of_steps=(\d+)', text)
    if steps_flag and steps is not None:
        factor = min(int(steps_flag[1]), steps) / int(steps_flag[1])
        text = re.sub(r'--warmup_epochs=([\d.]+)',
                      lambda m: f'--warmup_epochs={float(m[1]) * factor:g}', text)
    if steps is not None:
        text = re.sub(r'--max_number_of_steps=(\d+)',
                      lambda m: f'--max_number_of_steps={min(int(m[1]), steps)}', text)
    text = re.sub(r'--rounds=\d+', '--rounds=1', text)
    if steps is not None:  # recomputed batch-norm statistics: 2 batches, as steps
        text = re.sub(r'--recompute_batch_norm_statistics=(\d+)',
                      lambda m: f'--recompute_batch_norm_statistics={min(int(m[1]), 2)}', text)

    # 3. Example hosts -> 127.0.0.1 and a free port, the same one for the same address.
    def local(match):
        if match[0] not in ports:
            ports[match[0]] = free_port()
        return f'127.0.0.1:{ports[match[0]]}'
    text = re.sub(r'\b(?:\d{1,3}\.){3}\d{1,3}:\d+\b', local, text)
    # 4. One machine's commands ("# on HOST" ... up to the next) run beside the others'.
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if MACHINE.match(line)]
    if starts:
        sections = [lines[a:b] for a, b in zip(starts, starts[1:] + [len(lines)])]
        text = '\n'.join(
            lines[:starts[0]] + ['__docs_pids=()']
            + [f'(\n{chr(10).join(section)}\n) &\n__docs_pids+=($!)' for section in sections]
            # The first machine to fail fails the block (the rest are then stopped).
            + ['for __pid in "${__docs_pids[@]}"; do wait -n || exit $?; done']) + '\n'
    return text


def prepare_scratch(scratch, fixtures, photos=None):
    """A scratch directory that looks like the checkout to the docs' commands (its
    scripts linked, not copied), with copies of the fixtures: my_photos/ and
    new_photo.jpg at the top (from `photos`, a directory write_photos wrote, if given),
    shapes/, mnist/, cifar10/ and flowers/ in disk/ (the docs' /tmp/shapes, ...), and
    disk/checkpoints/ once built (ensure_checkpoints)."""
    scratch = pathlib.Path(scratch)
    (scratch / DISK).mkdir(parents=True, exist_ok=True)
    for pattern in LINKED:
        for entry in ROOT.glob(pattern):
            if not (scratch / entry.name).exists():
                (scratch / entry.name).symlink_to(entry)
    fixtures = pathlib.Path(fixtures)
    photos = pathlib.Path(photos) if photos else fixtures
    shutil.copytree(photos / 'my_photos', scratch / 'my_photos')
    shutil.copy2(photos / 'new_photo.jpg', scratch / 'new_photo.jpg')
    shutil.copytree(fixtures / 'shapes', scratch / DISK / 'shapes')
    for name in slim_fixtures.DATASETS:
        shutil.copytree(fixtures / 'slim' / name, scratch / DISK / name)
    # The timm snapshots (maintainer/timm_goldens.py) as the docs' /tmp/timm/<name>.
    (scratch / DISK / 'timm').symlink_to(ROOT / 'tests' / 'data' / 'timm')
    if (fixtures / 'checkpoints').is_dir():  # large and only read: linked
        (scratch / DISK / 'checkpoints').symlink_to(fixtures / 'checkpoints')
    return scratch


def environment(extra=None):
    env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
    # `python` in a doc is this test's interpreter (the project's venv), and the
    # packages import from the checkout, as when a user runs there.
    env['PATH'] = os.path.dirname(sys.executable) + os.pathsep + env.get('PATH', '')
    env['PYTHONPATH'] = str(ROOT)
    env['BASE_PORT'] = str(free_port_range())
    env.update(extra or {})
    return env


def run_block(block, scratch, ports, number, timeout=None, documented_steps=False):
    """Runs one block with `bash -e` in the scratch directory; an Outcome. With
    documented_steps its trainings keep their --max_number_of_steps and its accuracy
    bar is checked."""
    script = rewrite(block.text, scratch, ports, None if documented_steps else block.steps)
    path = pathlib.Path(scratch) / f'.docs_block_{number:02d}.sh'
    path.write_text(script)
    timeout = timeout or block.timeout or (SLOW_TIMEOUT if block.slow or documented_steps
                                           else FAST_TIMEOUT)
    start = time.monotonic()
    process = subprocess.Popen(['bash', '-e', str(path)], cwd=scratch, env=environment(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
        status = 'passed' if process.returncode == 0 else 'failed'
    except subprocess.TimeoutExpired:
        status = 'timed out'
        _kill_group(process.pid)
        output, _ = process.communicate()
        output += f'\n[docs test: killed after {timeout} s]'
    finally:
        _kill_group(process.pid)  # whatever the block left running (servers, ...)
    if status == 'passed' and documented_steps and block.accuracy is not None:
        reached = [float(value) for value in ACCURACY.findall(output)]
        if not reached or reached[-1] < block.accuracy:
            status = 'failed'
            output += (f'\n[docs test: eval/Accuracy {reached[-1] if reached else "not printed"}'
                       f', below the page\'s bar of {block.accuracy}]')
    return Outcome(block, status, time.monotonic() - start, output, script)


def _kill_group(pgid):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        time.sleep(0.5)


def run_page(blocks, scratch, include_slow):
    """Runs a page's blocks in order; stops at the first failure (later blocks may
    need its output), except of a known-failing block. Returns one outcome per block.

    A page with an outcome check (accuracy>=X) runs in the slow run at its documented
    step counts and checks the bar; the fast run checks its exit codes only."""
    documented_steps = include_slow and any(b.accuracy is not None for b in blocks)
    outcomes, failed = [], False
    for number, block in enumerate(blocks):
        if block.skip:
            outcomes.append(Outcome(block, 'skipped'))
        elif (block.slow and not include_slow) or failed:
            outcomes.append(Outcome(block, 'slow, not run' if not failed else 'not run'))
        else:
            outcome = run_block(block, scratch, {}, number,
                                documented_steps=documented_steps)
            outcomes.append(outcome)
            failed = outcome.status != 'passed' and not block.known_failing
    return outcomes


def failure_report(outcome, tail=60):
    lines = outcome.output.rstrip().splitlines()
    known = (f'KNOWN-FAILING ({outcome.block.known_failing}): '
             if outcome.block.known_failing else '')
    return (f'{known}docs block {outcome.block.where} {outcome.status} after '
            f'{outcome.seconds:.0f} s.\n--- as run ---\n{outcome.script}--- last '
            f'{min(tail, len(lines))} lines of output ---\n' + '\n'.join(lines[-tail:]))


# The data the docs' blocks find in their scratch directory.
PHOTO_CLASSES = ('daisy', 'roses', 'tulips')


# Each class a scene of its own colours (as forest, sea and sunset photos differ): a
# background gradient between two colours, blobs of a third, noise. Separable by colour,
# so a net trained for the README tour's 300 steps must classify them all.
PHOTO_SCENES = {  # class: (top colour, bottom colour, blob colour), RGB
    'daisy': ((70, 140, 60), (30, 90, 30), (245, 245, 235)),
    'roses': ((60, 40, 40), (40, 80, 40), (200, 20, 40)),
    'tulips': ((250, 180, 60), (230, 120, 40), (250, 230, 80)),
}


def draw_photo(name, height, width, rng):
    """One uint8 [height, width, 3] scene of class `name` (PHOTO_SCENES)."""
    import numpy as np
    top, bottom, blob = (np.array(c, np.float32) for c in PHOTO_SCENES[name])
    rows = np.linspace(0, 1, height, dtype=np.float32)[:, None, None]
    image = np.broadcast_to(top * (1 - rows) + bottom * rows, (height, width, 3)).copy()
    ys, xs = np.mgrid[:height, :width]
    for _ in range(rng.integers(3, 9)):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        radius = rng.uniform(0.05, 0.15) * min(height, width)
        image[(ys - cy) ** 2 + (xs - cx) ** 2 < radius ** 2] = blob
    image *= rng.uniform(0.75, 1.15)  # exposure
    image += rng.normal(0, 12, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


TEXTURE_CLASSES = ('checks', 'dots', 'gradients', 'stripes')


def draw_texture(name, height, width, rng):
    """One uint8 [height, width, 3] photo of texture `name` (TEXTURE_CLASSES) in two
    random colours, at a random angle and scale: classes that differ in pattern only,
    never in colour."""
    import numpy as np
    colours = rng.uniform(0, 255, (2, 3)).astype(np.float32)
    ys, xs = np.mgrid[:height, :width].astype(np.float32)
    angle = rng.uniform(0, np.pi)
    along = xs * np.cos(angle) + ys * np.sin(angle)
    across = -xs * np.sin(angle) + ys * np.cos(angle)
    period = rng.uniform(6, 14)
    if name == 'stripes':
        mix = (np.floor(along / period) % 2).astype(np.float32)
    elif name == 'checks':
        mix = ((np.floor(along / period) + np.floor(across / period)) % 2).astype(np.float32)
    elif name == 'dots':
        near = (along % period - period / 2) ** 2 + (across % period - period / 2) ** 2
        mix = (near < (rng.uniform(0.2, 0.35) * period) ** 2).astype(np.float32)
    else:  # a smooth ramp across the whole photo
        mix = (along - along.min()) / max(float(np.ptp(along)), 1.0)
    image = colours[0] * (1 - mix[..., None]) + colours[1] * mix[..., None]
    image *= rng.uniform(0.75, 1.15)  # exposure
    image += rng.normal(0, 12, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def write_photos(directory, per_class=60, seed=0, textures=False):
    """my_photos/<class>/*.jpg: small JPEGs (one PNG per class) of each class's scene
    (PHOTO_SCENES), or with `textures` of each texture (TEXTURE_CLASSES), at a few
    sizes; and new_photo.jpg (roses, or stripes) beside it."""
    import numpy as np
    import tensorflow as tf
    directory = pathlib.Path(directory)
    rng = np.random.default_rng(seed)
    draw = draw_texture if textures else draw_photo
    for name in TEXTURE_CLASSES if textures else PHOTO_CLASSES:
        (directory / 'my_photos' / name).mkdir(parents=True, exist_ok=True)
        for number in range(per_class):
            image = draw(name, *rng.integers(48, 97, 2), rng)
            png = number == 0
            data = tf.io.encode_png(image) if png else tf.io.encode_jpeg(image)
            suffix = 'png' if png else 'jpg'
            (directory / 'my_photos' / name / f'{name}_{number:02d}.{suffix}').write_bytes(
                data.numpy())
    (directory / 'new_photo.jpg').write_bytes(tf.io.encode_jpeg(
        draw('stripes' if textures else 'roses', 80, 96, rng)).numpy())


def build_fixtures(directory):
    """What every page's scratch directory starts with: my_photos/ and new_photo.jpg,
    shapes/ (converted by the converter script, as docs/data.md does), and slim's
    datasets in small (slim_fixtures)."""
    directory = pathlib.Path(directory)
    write_photos(directory)
    slim_fixtures.write_datasets(directory / 'slim')
    subprocess.run([sys.executable, str(ROOT / 'download_and_convert_data.py'),
                    '--dataset_name=shapes', f'--dataset_dir={directory / "shapes"}'],
                   cwd=directory, env=environment(), check=True, capture_output=True,
                   timeout=300)
    return directory


def ensure_checkpoints(fixtures, blocks):
    """The model-zoo checkpoints (disk/checkpoints/), written on the first page whose
    running blocks use them (about 200 MB: not for pages that do not)."""
    target = pathlib.Path(fixtures) / 'checkpoints'
    if not target.exists() and any('/tmp/checkpoints' in block.text for block in blocks):
        slim_fixtures.write_checkpoints(target)
