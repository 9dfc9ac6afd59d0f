"""--recompute_batch_norm_statistics on a checkpoint of each family with batch norm: the
copy's moving statistics are the recomputed ones, every other tensor the source's; the
source is untouched and a directory of someone else's files is refused; a run killed
while writing leaves nothing that stops the next."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils

from cli import batch_norm_job
from cli.assembly import DataConfig
from core.errors import UsageError
from core.naming import slim_name
from nets import nets_factory
from training.checkpoints import integrity

KILLED_RUN = pathlib.Path(__file__).parents[1] / 'helpers' / 'run_recompute_killed.py'

FAMILIES = [
    ('mobilenet_v1_025', 32), ('efficientnet_b0', 32),
    pytest.param('resnet_v2_50', 32, marks=pytest.mark.slow),
    pytest.param('mobilenet_v3_small', 32, marks=pytest.mark.slow),
    pytest.param('nasnet_mobile', 96, marks=pytest.mark.slow),  # its drop-path is off
    pytest.param('inception_v3', 160, marks=pytest.mark.slow),  # its auxiliary head runs
    pytest.param('efficientnet_v2_b0', 32, marks=pytest.mark.slow),
]


def _source_checkpoint(directory, model_name, image_size):
    """A name-based checkpoint of a freshly initialised 10-class net: statistics 0 and 1."""
    network = nets_factory.get_network_fn(model_name, 10)
    network.build((image_size, image_size, 3))
    prefix = directory / 'model.ckpt-7'
    testing_utils.write_tf1_checkpoint(prefix, {slim_name(v): v.numpy()
                                                for v in network.variables})
    return str(prefix), {slim_name(v): v.numpy() for v in network.variables}


@pytest.mark.parametrize('model_name, image_size', FAMILIES)
def test_a_copy_with_recomputed_statistics(model_name, image_size, shapes_dir, tmp_path):
    source, before = _source_checkpoint(tmp_path, model_name, image_size)
    data = DataConfig('shapes', 'train', str(shapes_dir), model_name, batch_size=4,
                      image_size=image_size, seed=1)
    written = batch_norm_job.recompute_checkpoint(
        data, source, 2, output_dir=None, strategy=tf.distribute.get_strategy())
    assert written == str(tmp_path / 'batch_norm_statistics' / 'model.ckpt-7')
    reader = tf.train.load_checkpoint(written)
    statistics = [name for name in before if name.endswith(('moving_mean', 'moving_variance'))]
    assert statistics
    for name in before:
        value = reader.get_tensor(name)
        if name in statistics:
            initial = 0.0 if name.endswith('moving_mean') else 1.0
            assert np.isfinite(value).all() and not np.all(value == initial), name
        else:
            np.testing.assert_array_equal(value, before[name])
    source_reader = tf.train.load_checkpoint(source)  # the source is untouched
    assert np.all(source_reader.get_tensor(statistics[0]) == before[statistics[0]])
    record = json.loads((tmp_path / 'batch_norm_statistics' /
                         batch_norm_job.RECORD_FILE).read_text())
    assert (record['num_batches'], record['checkpoint'], record['split']) == (
        2, 'model.ckpt-7', 'train')


def test_someone_elses_directory_and_nets_without_batch_norm_are_refused(shapes_dir,
                                                                         tmp_path):
    source, _ = _source_checkpoint(tmp_path, 'mobilenet_v1_025', 32)
    theirs = tmp_path / 'theirs'
    theirs.mkdir()
    (theirs / 'notes.txt').write_text('mine')
    data = DataConfig('shapes', 'train', str(shapes_dir), 'mobilenet_v1_025', batch_size=4,
                      image_size=32)
    with pytest.raises(UsageError, match='did not write'):
        batch_norm_job.recompute_checkpoint(data, source, 1, output_dir=str(theirs),
                                            strategy=tf.distribute.get_strategy())
    assert (theirs / 'notes.txt').read_text() == 'mine'
    with pytest.raises(UsageError, match='no batch norm'):
        batch_norm_job.recompute_checkpoint(
            DataConfig('shapes', 'train', str(shapes_dir), 'cifarnet', batch_size=4),
            source, 1, output_dir=None, strategy=tf.distribute.get_strategy())


def _killed_then_rerun(shapes_dir, tmp_path, moment, signal_name):
    """The script killed at `moment` of writing, then run again to the end: the output
    directory's files, and the source's tensors before."""
    source, before = _source_checkpoint(tmp_path, 'mobilenet_v1_025', 32)
    flags = ['--dataset_name=shapes', f'--dataset_dir={shapes_dir}',
             '--model_name=mobilenet_v1_025', f'--checkpoint_path={source}',
             '--image_size=32', '--batch_size=4', '--recompute_batch_norm_statistics=1']
    killed = subprocess.run(
        [sys.executable, str(KILLED_RUN), f'--kill_at={moment}',
         f'--kill_signal={signal_name}', *flags], capture_output=True, text=True,
        timeout=300, env=dict(os.environ, PYTHONPATH=str(KILLED_RUN.parents[2])))
    assert killed.returncode == (-9 if signal_name == 'KILL' else 143), killed.stderr[-2000:]
    output = tmp_path / 'batch_norm_statistics'
    assert any(p.name.startswith('.staging-') for p in output.iterdir())  # the kill's
    data = DataConfig('shapes', 'train', str(shapes_dir), 'mobilenet_v1_025', batch_size=4,
                      image_size=32, seed=1)
    written = batch_norm_job.recompute_checkpoint(data, source, 1, output_dir=None,
                                                  strategy=tf.distribute.get_strategy())
    return output, written, source, before


def _assert_complete(output, written, source, before):
    assert sorted(p.name for p in output.iterdir()) == [
        batch_norm_job.RECORD_FILE, 'checkpoint', 'model.ckpt-7.data-00000-of-00001',
        'model.ckpt-7.index']  # nothing of the killed run
    assert integrity.find_damage(written) is None
    assert set(tf.train.load_checkpoint(written).get_variable_to_shape_map()) == set(before)
    source_reader = tf.train.load_checkpoint(source)
    for name, value in before.items():  # the source is unchanged
        np.testing.assert_array_equal(source_reader.get_tensor(name), value)


def test_a_run_killed_at_the_write_is_completed_by_the_next(shapes_dir, tmp_path):
    _assert_complete(*_killed_then_rerun(shapes_dir, tmp_path, 'after_write', 'KILL'))


@pytest.mark.slow  # 8 more runs of the script; the fast suite kills one at the write
@pytest.mark.parametrize('signal_name', ['TERM', 'KILL'])
@pytest.mark.parametrize('moment', ['before_write', 'after_write', 'after_record',
                                    'before_index'])
def test_a_run_killed_at_any_moment_is_completed_by_the_next(shapes_dir, tmp_path, moment,
                                                             signal_name):
    _assert_complete(*_killed_then_rerun(shapes_dir, tmp_path, moment, signal_name))


def test_a_staging_folder_of_someone_else_is_not_taken_for_ours(tmp_path):
    ours, theirs, empty = (tmp_path / f'.staging-{n}' for n in ('a', 'b', 'c'))
    for folder in (ours, theirs, empty):
        folder.mkdir()
    (ours / integrity.STAGING_MARKER).write_text(batch_norm_job.WRITER)
    (ours / 'model.ckpt-7.index').write_text('partial')
    (theirs / integrity.STAGING_MARKER).write_text('average_checkpoints')
    (theirs / 'notes.txt').write_text('mine')
    assert sorted(integrity.staging_leftovers(str(tmp_path), batch_norm_job.WRITER)) == [
        str(ours), str(empty)]
