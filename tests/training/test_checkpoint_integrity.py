"""Damaged checkpoints are found, named, passed over for the newest intact one, left in
place, and dropped from the `checkpoint` state file; the manager then never deletes
them."""
import os

import pytest
import tensorflow as tf

from core.errors import UsageError
from training.checkpoints import integrity
from training.checkpoints import restore


def _manager(train_dir, max_to_keep=5):
    checkpoint = tf.train.Checkpoint(weights=tf.Variable(tf.range(10000.0)),
                                     step=tf.Variable(0, dtype=tf.int64))
    return tf.train.CheckpointManager(checkpoint, str(train_dir), max_to_keep=max_to_keep,
                                      checkpoint_name='model.ckpt')


def _saved(train_dir, steps, max_to_keep=5):
    manager = _manager(train_dir, max_to_keep)
    for step in steps:
        manager.save(checkpoint_number=step)
    return {step: str(train_dir / f'model.ckpt-{step}') for step in steps}


def _data(prefix):
    return prefix + '.data-00000-of-00001'


def _flip_a_byte(path, offset):
    with open(path, 'r+b') as f:
        f.seek(offset)
        value = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([value ^ 0xFF]))


DAMAGE = {
    'truncated': (lambda p: os.truncate(_data(p), 1000),
                  'model.ckpt-3.data-00000-of-00001 is truncated (1000 bytes)'),
    'zero-length': (lambda p: os.truncate(_data(p), 0),
                    'model.ckpt-3.data-00000-of-00001 is empty (0 bytes)'),
    'bit-flipped': (lambda p: _flip_a_byte(_data(p), os.path.getsize(_data(p)) // 2),
                    'model.ckpt-3.data-00000-of-00001 fails its checksum'),
    'index removed': (lambda p: os.remove(p + '.index'),
                      'model.ckpt-3.index is missing; model.ckpt-3.data-00000-of-00001 is '
                      'still there'),
    'data removed': (lambda p: os.remove(_data(p)),
                     'model.ckpt-3.data-00000-of-00001 is missing'),
    'index damaged': (lambda p: _flip_a_byte(p + '.index', 20),
                      'model.ckpt-3.index is unreadable'),
}


@pytest.mark.parametrize('damage', DAMAGE)
def test_damage_is_named_and_the_newest_intact_checkpoint_found(tmp_path, damage):
    prefixes = _saved(tmp_path, [1, 2, 3])
    assert integrity.find_damage(prefixes[3]) is None
    harm, description = DAMAGE[damage]
    harm(prefixes[3])
    assert description in integrity.find_damage(prefixes[3])
    search = integrity.newest_intact(str(tmp_path))
    assert search.intact == prefixes[2]
    assert [prefix for prefix, _ in search.damaged] == [prefixes[3]]
    message = search.fallback_message('evaluating')
    assert message.startswith(f'Checkpoint {prefixes[3]} is damaged ({description}')
    assert f'evaluating {prefixes[2]}, the newest intact checkpoint' in message
    assert '\n' not in message


def test_a_directory_resolves_to_its_newest_intact_checkpoint(tmp_path, caplog):
    prefixes = _saved(tmp_path, [1, 2, 3])
    os.truncate(_data(prefixes[3]), 10)
    assert restore.resolve_checkpoint(str(tmp_path)) == prefixes[2]
    assert sum('is damaged' in r.getMessage() for r in caplog.records) == 1
    with pytest.raises(UsageError, match=r'Checkpoint .*model.ckpt-3 is damaged \(model'
                       r'.ckpt-3.data-00000-of-00001 is truncated \(10 bytes\)\); pass '
                       r'another checkpoint, or its directory'):
        restore.resolve_checkpoint(prefixes[3], verify=True)
    for prefix in prefixes.values():
        os.truncate(_data(prefix), 10)
    with pytest.raises(UsageError, match='holds no intact checkpoint; pass another '
                       '--checkpoint_path'):
        restore.resolve_checkpoint(str(tmp_path))


def test_nothing_damaged_changes_nothing(tmp_path):
    _saved(tmp_path, [1, 2, 3])
    state = (tmp_path / 'checkpoint').read_text()
    search = integrity.newest_intact(str(tmp_path), unlisted=True)
    assert search.intact == str(tmp_path / 'model.ckpt-3') and not search.damaged
    assert not integrity.repair_state(search)
    assert (tmp_path / 'checkpoint').read_text() == state


def test_the_repaired_state_lists_what_exists_and_the_manager_keeps_damaged_files(
        tmp_path):
    prefixes = _saved(tmp_path, [1, 2, 3, 4], max_to_keep=3)  # 1 deleted
    os.truncate(_data(prefixes[4]), 100)
    os.remove(prefixes[3] + '.index')
    before = tf.train.get_checkpoint_state(str(tmp_path))
    search = integrity.newest_intact(str(tmp_path), unlisted=True)
    assert search.intact == prefixes[2] and len(search.damaged) == 2
    assert integrity.repair_state(search)
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == prefixes[2]
    assert list(state.all_model_checkpoint_paths) == [prefixes[2]]
    assert list(state.all_model_checkpoint_timestamps) == [
        before.all_model_checkpoint_timestamps[0]]
    assert tf.train.latest_checkpoint(str(tmp_path)) == prefixes[2]
    # Training goes on from step 2, keeping 3 checkpoints: the damaged files stay.
    damaged_files = [_data(prefixes[3]), prefixes[4] + '.index', _data(prefixes[4])]
    manager = _manager(tmp_path, max_to_keep=3)
    for step in (5, 6, 7, 8):
        manager.save(checkpoint_number=step)
    assert all(os.path.exists(path) for path in damaged_files)
    assert tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths[:] == [
        str(tmp_path / f'model.ckpt-{step}') for step in (6, 7, 8)]


def test_an_unlisted_complete_checkpoint_counts_for_the_training_only(tmp_path):
    prefixes = _saved(tmp_path, [1, 2])
    state = (tmp_path / 'checkpoint').read_text()
    _saved(tmp_path, [3])  # as a save killed before it listed its checkpoint:
    (tmp_path / 'checkpoint').write_text(state)
    assert integrity.newest_intact(str(tmp_path)).intact == prefixes[2]
    search = integrity.newest_intact(str(tmp_path), unlisted=True)
    assert search.intact == str(tmp_path / 'model.ckpt-3')
    assert integrity.repair_state(search)
    assert tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths[:] == [
        prefixes[1], prefixes[2], str(tmp_path / 'model.ckpt-3')]


def test_a_save_of_a_damaged_checkpoints_step_sets_its_files_aside(tmp_path):
    prefixes = _saved(tmp_path, [1, 2])
    os.truncate(_data(prefixes[2]), 5)
    integrity.repair_state(integrity.newest_intact(str(tmp_path)))
    manager = _manager(tmp_path)
    assert integrity.set_aside(prefixes[1], manager.checkpoints) == []  # listed
    moved = integrity.set_aside(prefixes[2], manager.checkpoints)
    assert sorted(os.path.basename(path) for path in moved) == [
        'model.ckpt-2.data-00000-of-00001', 'model.ckpt-2.index']
    assert all(os.path.dirname(path).startswith(
        str(tmp_path / integrity.DAMAGED_DIR)) for path in moved)
    assert os.path.getsize(moved[0] if moved[0].endswith('1') else moved[1]) == 5
    assert not os.path.exists(prefixes[2] + '.index')
    assert integrity.set_aside(str(tmp_path / 'model.ckpt-9'), []) == []
