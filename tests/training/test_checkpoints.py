"""Restoring by slim name from TF1 (model-zoo style) and from toolkit checkpoints."""
import numpy as np
import pytest
import tensorflow as tf

from core.naming import slim_name
import testing_utils

from training import checkpoints
from core.errors import UsageError
from nets import nets_factory

GOLDEN = testing_utils.TEST_DATA / 'slim_reference' / 'golden'


def _write_tf1_checkpoint(prefix, tensors):
    """A name-based checkpoint, the format tf.compat.v1.train.Saver writes."""
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=names,
                      shape_and_slices=[''] * len(names),
                      tensors=[tf.constant(tensors[n]) for n in names])
    return str(prefix)


def _cifarnet(num_classes=10):
    net = nets_factory.get_network_fn('cifarnet', num_classes)
    net.build((32, 32, 3))
    return net


@pytest.fixture
def golden_checkpoint(tmp_path):
    reference = _cifarnet()
    values = {slim_name(v): testing_utils.golden_weight_value(
        slim_name(v), v.shape) for v in reference.variables}
    values['global_step'] = np.int64(1234)
    return _write_tf1_checkpoint(tmp_path / 'model.ckpt', values), values


def test_slim_checkpoint_restores_by_name_and_reproduces_golden_logits(golden_checkpoint):
    path, _ = golden_checkpoint
    net = _cifarnet()
    assert checkpoints.restore_network(net, path) == 1234
    logits, _ = net(testing_utils.golden_input(32))
    golden = np.load(GOLDEN / 'cifarnet.npz')['logits']
    assert np.abs(logits.numpy() - golden).max() / max(1, np.abs(golden).max()) < 1e-4


def test_excluded_scopes_keep_their_values(golden_checkpoint):
    path, values = golden_checkpoint
    net = _cifarnet(num_classes=5)  # a new head: the fine-tuning case
    head_before = net.logits.weights.numpy()
    checkpoints.restore_network(net, path, exclude_scopes=['CifarNet/logits'])
    np.testing.assert_array_equal(net.logits.weights.numpy(), head_before)
    np.testing.assert_array_equal(net.conv1.weights.numpy(),
                                  values['CifarNet/conv1/weights'])


def test_shape_mismatch_is_listed_with_the_fix(golden_checkpoint):
    path, _ = golden_checkpoint
    with pytest.raises(UsageError, match=r'CifarNet/logits/weights: checkpoint '
                                         r'\[192, 10\] vs model \[192, 5\].*'
                                         r'--checkpoint_exclude_scopes.*--labels_offset') as error:
        checkpoints.restore_network(_cifarnet(num_classes=5), path)
    assert '--num_classes' not in str(error.value)  # slim's scripts have no such flag
    with pytest.raises(UsageError):
        checkpoints.restore_network(_cifarnet(num_classes=5), path)


def test_missing_variables_fail_unless_ignored(tmp_path, golden_checkpoint):
    _, values = golden_checkpoint
    partial = {k: v for k, v in values.items() if not k.startswith('CifarNet/fc4')}
    path = _write_tf1_checkpoint(tmp_path / 'partial.ckpt', partial)
    with pytest.raises(UsageError, match='lacks 2 .*--ignore_missing_vars'):
        checkpoints.restore_network(_cifarnet(), path)
    net = _cifarnet()
    checkpoints.restore_network(net, path, ignore_missing_vars=True)
    np.testing.assert_array_equal(net.fc3.weights.numpy(), values['CifarNet/fc3/weights'])


def test_toolkit_object_checkpoint_restores_by_name(tmp_path):
    source = _cifarnet()
    step = tf.Variable(7, dtype=tf.int64)
    path = tf.train.Checkpoint(**{checkpoints.MODEL_KEY: source}, global_step=step).save(
        str(tmp_path / 'ckpt'))
    target = _cifarnet()
    assert checkpoints.restore_network(target, path) == 7
    for a, b in zip(source.variables, target.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # A directory resolves to its latest checkpoint.
    assert checkpoints.resolve_checkpoint(str(tmp_path)) == path


def test_bad_paths_name_the_fix(tmp_path):
    with pytest.raises(UsageError, match='No checkpoint found'):
        checkpoints.resolve_checkpoint(str(tmp_path))
    with pytest.raises(UsageError, match='does not exist'):
        checkpoints.resolve_checkpoint(str(tmp_path / 'model.ckpt-5'))
