"""--recompute_batch_norm_statistics on a checkpoint of each family with batch norm: the
copy's moving statistics are the recomputed ones, every other tensor the source's; the
source is untouched and a directory of someone else's files is refused."""
import json

import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils

from cli import batch_norm_job
from cli.assembly import DataConfig
from core.errors import UsageError
from core.naming import slim_name
from nets import nets_factory

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
