"""Checkpoint averaging: the exact mean of the network's floats, the rest copied from the
newest, and the refusals (other networks, files it did not write, the source directory)."""
import numpy as np
import pytest
import tensorflow as tf

from core.errors import UsageError
from training.checkpoints import averaging as averaging_lib


class _Net(tf.Module):
    """Stands for a network: a float weight, a batch-norm-like statistic."""

    def __init__(self, shape=(3, 4), seed=0):
        super().__init__()
        generator = np.random.default_rng(seed)
        self.weights = tf.Variable(generator.normal(size=shape).astype(np.float32))
        self.moving_mean = tf.Variable(generator.normal(size=shape[-1:]).astype(np.float32),
                                       trainable=False)


def _save(directory, step, net, slot_value):
    """A checkpoint laid out as training writes it: model, optimizer slot, step."""
    root = tf.train.Checkpoint(model=net, global_step=tf.Variable(step, dtype=tf.int64),
                               optimizer=tf.train.Checkpoint(
                                   momentum=tf.Variable(slot_value, dtype=tf.float32)))
    return root.write(str(directory / f'model.ckpt-{step}'))


def _values(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()}


def test_the_average_is_the_elementwise_mean_exactly(tmp_path):
    first = _save(tmp_path, 10, _Net(seed=1), 1.0)
    second = _save(tmp_path, 20, _Net(seed=2), 2.0)
    result = averaging_lib.average([first, second], str(tmp_path / 'averaged'))
    assert result.prefix == str(tmp_path / 'averaged' / 'model.ckpt-20')
    assert result.num_averaged == 2 and result.steps == (10, 20)
    a, b, averaged = _values(first), _values(second), _values(result.prefix)
    for key in ('model/weights/.ATTRIBUTES/VARIABLE_VALUE',
                'model/moving_mean/.ATTRIBUTES/VARIABLE_VALUE'):
        assert averaged[key].dtype == np.float32
        # float32 arithmetic gives the same here: halving is exact.
        np.testing.assert_array_equal(averaged[key], (a[key] + b[key]) / np.float32(2))
    # The step and the optimizer's slot are the newest checkpoint's, not averaged.
    assert averaged['global_step/.ATTRIBUTES/VARIABLE_VALUE'] == 20
    assert averaged['optimizer/momentum/.ATTRIBUTES/VARIABLE_VALUE'] == 2.0
    # The output directory names it as its latest: evaluation takes the directory.
    assert tf.train.latest_checkpoint(str(tmp_path / 'averaged')) == result.prefix


def test_checkpoints_of_different_networks_are_refused_in_one_line(tmp_path):
    first = _save(tmp_path, 1, _Net(shape=(3, 4)), 0.0)
    other = _save(tmp_path, 2, _Net(shape=(5, 4)), 0.0)
    with pytest.raises(UsageError, match=r'not of one network \(model/weights: shape '
                                         r'\[3, 4\] float32 against \[5, 4\] float32\)'):
        averaging_lib.average([first, other], str(tmp_path / 'out'))
    assert not (tmp_path / 'out').exists()


def test_files_it_did_not_write_are_never_replaced_without_overwrite(tmp_path):
    sources = [_save(tmp_path / 'train', step, _Net(seed=step), 0.0) for step in (1, 2)]
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'checkpoint').write_text('a user\'s state file\n')
    with pytest.raises(UsageError, match=r'out/checkpoint exists already; pass --overwrite'):
        averaging_lib.average(sources, str(out))
    assert (out / 'checkpoint').read_text() == 'a user\'s state file\n'
    averaging_lib.average(sources, str(out), overwrite=True)
    # Its own state file it replaces; a checkpoint of the same step it does not.
    averaging_lib.average(sources[:1] * 2, str(out))
    with pytest.raises(UsageError, match=r'model.ckpt-2.index exists already'):
        averaging_lib.average(sources, str(out))


def test_the_training_directory_itself_is_refused(tmp_path):
    sources = [_save(tmp_path, step, _Net(seed=step), 0.0) for step in (1, 2)]
    with pytest.raises(UsageError, match='holds the checkpoints being averaged'):
        averaging_lib.average(sources, str(tmp_path), overwrite=True)


def test_the_newest_intact_checkpoints_of_a_directory(tmp_path, caplog):
    train = tmp_path / 'train'
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=_Net()), str(train), max_to_keep=5,
        checkpoint_name='model.ckpt')
    for step in (1, 2, 3, 4):
        manager.save(checkpoint_number=step)
    damaged = train / 'model.ckpt-4.data-00000-of-00001'
    damaged.write_bytes(damaged.read_bytes()[:10])
    chosen = averaging_lib.newest_intact(str(train), 2)
    assert chosen == [str(train / 'model.ckpt-2'), str(train / 'model.ckpt-3')]
    assert 'model.ckpt-4 (model.ckpt-4.data-00000-of-00001 is truncated' in caplog.text
