"""A save that fails (disk full, I/O error) or was killed leaves nothing behind, and the
last complete checkpoint stays the latest."""
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.checkpoint import functional_saver

from core.errors import SaveFailed
from nets import nets_factory
from training.recipes import learning_rate
from training.recipes import optimizers
from training.loop import trainer as trainer_lib


def _trainer(train_dir, max_steps):
    images = np.random.default_rng(0).uniform(-1, 1, (8, 28, 28, 1)).astype(np.float32)
    labels = np.arange(8) % 10

    def input_fn(input_context=None):
        del input_context
        return tf.data.Dataset.from_tensor_slices((images, labels)).batch(4).repeat()

    network = nets_factory.get_network_fn('lenet', 10, is_training=True)
    return trainer_lib.Trainer(
        strategy=tf.distribute.get_strategy(), network=network,
        optimizer=optimizers.create_optimizer(optimizers.OptimizerConfig('sgd')),
        learning_rate_fn=learning_rate.create_learning_rate_fn(
            learning_rate.LearningRateConfig('fixed'), 100, 4),
        input_fn=input_fn, image_shape=(28, 28, 1),
        config=trainer_lib.TrainConfig(train_dir=str(train_dir), batch_size=4,
                                      max_number_of_steps=max_steps, log_every_n_steps=2))


def _debris(train_dir):
    return sorted(name for name in os.listdir(train_dir)
                  if '_temp' in name or name.startswith('model.ckpt-4'))


def test_disk_full_during_a_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    _trainer(tmp_path, max_steps=2).train()
    previous = tf.train.latest_checkpoint(str(tmp_path))
    assert previous.endswith('model.ckpt-2')

    def merge_on_a_full_disk(*args, **kwargs):
        # The shards are in '<prefix>_temp/' by now, as when the disk fills mid-save.
        assert any(name.endswith('_temp') for name in os.listdir(tmp_path))
        raise tf.errors.ResourceExhaustedError(None, None, 'No space left on device')

    monkeypatch.setattr(functional_saver.gen_io_ops, 'merge_v2_checkpoints',
                        merge_on_a_full_disk)
    with pytest.raises(SaveFailed) as error:
        _trainer(tmp_path, max_steps=4).train()
    message = str(error.value)
    assert 'No space left on device' in message and 'step 4' in message
    assert f'{previous} stays the latest' in message and '--train_dir' in message
    assert '\n' not in message
    assert tf.train.latest_checkpoint(str(tmp_path)) == previous
    assert _debris(tmp_path) == []
    monkeypatch.undo()
    resumed = _trainer(tmp_path, max_steps=4)
    assert resumed._restore_or_initialize() == 2  # pylint: disable=protected-access


def test_leftovers_of_a_killed_save_are_removed_at_start(tmp_path):
    _trainer(tmp_path, max_steps=2).train()
    stale = tmp_path / 'model.ckpt-4_temp'
    stale.mkdir()
    (stale / 'part-00000-of-00001.data-00000-of-00001').write_bytes(b'\0' * 1000)
    trainer = _trainer(tmp_path, max_steps=4)
    assert trainer._restore_or_initialize() == 2  # pylint: disable=protected-access
    assert not stale.exists()


def test_a_full_disk_is_said_plainly_without_tensorflows_op_text(tmp_path, monkeypatch):
    _trainer(tmp_path, max_steps=2).train()
    previous = tf.train.latest_checkpoint(str(tmp_path))

    def save_on_a_full_disk(*args, **kwargs):
        # What SaveV2 raises when the disk fills (measured on a 4 MB tmpfs).
        raise tf.errors.ResourceExhaustedError(
            None, None, '{{function_node __wrapped__SaveV2_dtypes_3_device_/job:localhost/'
            'replica:0/task:0/device:CPU:0}} '
            f'{tmp_path}/model.ckpt-4_temp/part-00000-of-00001.data-00000-of-00001.'
            'tempstate13841748250789760178; No space left on device [Op:SaveV2]')

    monkeypatch.setattr(functional_saver.io_ops, 'save_v2', save_on_a_full_disk)
    with pytest.raises(SaveFailed) as error:
        _trainer(tmp_path, max_steps=4).train()
    message = str(error.value)
    assert message.startswith(f'Saving the checkpoint of step 4 ({tmp_path}/model.ckpt-4) '
                              'failed: No space left on device; ')
    assert 'function_node' not in message and '[Op:' not in message
    assert '_temp' not in message and '\n' not in message
    assert f'{previous} stays the latest' in message
    assert _debris(tmp_path) == []
