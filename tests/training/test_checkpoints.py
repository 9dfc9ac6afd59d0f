"""Restoring by slim name from TF1 (model-zoo style) and from toolkit restore."""
import numpy as np
import pytest
import tensorflow as tf

from core.naming import slim_name
from helpers import testing_utils

from training.checkpoints import restore
from core.errors import UsageError
from nets import nets_factory

GOLDEN = testing_utils.TEST_DATA / 'slim_reference' / 'golden'


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
    return testing_utils.write_tf1_checkpoint(tmp_path / 'model.ckpt', values), values


def test_slim_checkpoint_restores_by_name_and_reproduces_golden_logits(golden_checkpoint):
    path, _ = golden_checkpoint
    net = _cifarnet()
    assert restore.restore_network(net, path) == 1234
    logits, _ = net(testing_utils.golden_input(32))
    golden = np.load(GOLDEN / 'cifarnet.npz')['logits']
    assert np.abs(logits.numpy() - golden).max() / max(1, np.abs(golden).max()) < 1e-4


def test_excluded_scopes_keep_their_values(golden_checkpoint):
    path, values = golden_checkpoint
    net = _cifarnet(num_classes=5)  # a new head: the fine-tuning case
    head_before = net.logits.weights.numpy()
    restore.restore_network(net, path, exclude_scopes=['CifarNet/logits'])
    np.testing.assert_array_equal(net.logits.weights.numpy(), head_before)
    np.testing.assert_array_equal(net.conv1.weights.numpy(),
                                  values['CifarNet/conv1/weights'])


def test_class_count_mismatch_names_the_exact_exclude_scopes(golden_checkpoint):
    path, _ = golden_checkpoint
    with pytest.raises(UsageError, match=r'CifarNet/logits/weights: checkpoint '
                                         r'\[192, 10\] vs model \[192, 5\].*'
                                         r'10 classes, the model 5.*'
                                         r'--checkpoint_exclude_scopes=CifarNet/logits\.$'
                       ) as error:
        restore.restore_network(_cifarnet(num_classes=5), path, fine_tuning=True)
    assert '--num_classes' not in str(error.value)
    # Evaluation and export cannot leave layers out: the fix is the data.
    with pytest.raises(UsageError, match=r'10 classes, the model 5 \(the dataset\'s classes '
                                         r'minus --labels_offset\)\. Use the dataset'):
        restore.restore_network(_cifarnet(num_classes=5), path)  # slim's scripts have no such flag


@pytest.mark.parametrize('model_classes, offset', [(9, 0), (11, 1)])
def test_background_class_mismatch_names_the_labels_offset(golden_checkpoint, model_classes,
                                                           offset):
    # 10 vs 9 is ImageNet's 1001 vs 1000: which side has the background class decides.
    path, _ = golden_checkpoint
    with pytest.raises(UsageError, match=rf'--checkpoint_exclude_scopes=CifarNet/logits; '
                                         rf'.*--labels_offset={offset} '):
        restore.restore_network(_cifarnet(num_classes=model_classes), path,
                                    fine_tuning=True)


def test_other_shape_mismatch_points_at_the_model(tmp_path, golden_checkpoint):
    _, values = golden_checkpoint
    values = {**values, 'CifarNet/conv1/weights': np.zeros([3, 3, 3, 64], np.float32)}
    path = testing_utils.write_tf1_checkpoint(tmp_path / 'other.ckpt', values)
    with pytest.raises(UsageError, match=r'conv1/weights: checkpoint \[3, 3, 3, 64\] vs '
                                         r'model \[5, 5, 3, 64\]\); .*--model_name'):
        restore.restore_network(_cifarnet(), path)


def test_exclude_scope_matching_nothing_is_an_error(golden_checkpoint):
    path, _ = golden_checkpoint
    with pytest.raises(UsageError, match=r'--checkpoint_exclude_scopes CifarNet/Logits '
                                         r'matches no variable.*CifarNet/logits'):
        restore.restore_network(_cifarnet(num_classes=5), path,
                                    exclude_scopes=['CifarNet/Logits'])


def test_plan_reports_every_kind_of_variable(tmp_path, golden_checkpoint):
    _, values = golden_checkpoint
    values = {k: v for k, v in values.items() if not k.startswith('CifarNet/fc4')}
    values['CifarNet/extra/weights'] = np.ones([2], np.float32)
    values['CifarNet/conv1/weights/Momentum'] = values['CifarNet/conv1/weights']  # a slot
    path = testing_utils.write_tf1_checkpoint(tmp_path / 'mixed.ckpt', values)
    plan = restore.plan_restore(_cifarnet(num_classes=5), path,
                                    exclude_scopes=['CifarNet/conv2'])
    assert sorted(restore.slim_name(v) for v, _ in plan.restored) == [
        'CifarNet/conv1/biases', 'CifarNet/conv1/weights', 'CifarNet/fc3/biases',
        'CifarNet/fc3/weights']
    assert sorted(plan.excluded) == ['CifarNet/conv2/biases', 'CifarNet/conv2/weights']
    assert sorted(plan.missing) == ['CifarNet/fc4/biases', 'CifarNet/fc4/weights']
    assert sorted(plan.mismatched) == [('CifarNet/logits/biases', [10], [5]),
                                       ('CifarNet/logits/weights', [192, 10], [192, 5])]
    assert plan.checkpoint_only == ['CifarNet/extra/weights']
    assert plan.global_step == 1234
    assert plan.summary().endswith('4 restored, 2 excluded, 2 missing, 2 shape-mismatched, '
                                   '1 only in the checkpoint.')
    report = plan.describe(verbose=True)
    assert '  missing (2):\n    CifarNet/fc4/biases\n    CifarNet/fc4/weights' in report


def test_missing_variables_fail_unless_ignored(tmp_path, golden_checkpoint):
    _, values = golden_checkpoint
    partial = {k: v for k, v in values.items() if not k.startswith('CifarNet/fc4')}
    path = testing_utils.write_tf1_checkpoint(tmp_path / 'partial.ckpt', partial)
    with pytest.raises(UsageError, match='lacks 2 .*--ignore_missing_vars'):
        restore.restore_network(_cifarnet(), path)
    net = _cifarnet()
    restore.restore_network(net, path, ignore_missing_vars=True)
    np.testing.assert_array_equal(net.fc3.weights.numpy(), values['CifarNet/fc3/weights'])


def test_toolkit_object_checkpoint_restores_by_name(tmp_path):
    source = _cifarnet()
    step = tf.Variable(7, dtype=tf.int64)
    path = tf.train.Checkpoint(**{restore.MODEL_KEY: source}, global_step=step).save(
        str(tmp_path / 'ckpt'))
    target = _cifarnet()
    assert restore.restore_network(target, path) == 7
    for a, b in zip(source.variables, target.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # A directory resolves to its latest checkpoint.
    assert restore.resolve_checkpoint(str(tmp_path)) == path


def test_bad_paths_name_the_fix(tmp_path):
    with pytest.raises(UsageError, match='No checkpoint found'):
        restore.resolve_checkpoint(str(tmp_path))
    with pytest.raises(UsageError, match='does not exist'):
        restore.resolve_checkpoint(str(tmp_path / 'model.ckpt-5'))


def test_a_model_zoo_single_file_checkpoint_is_read_as_it_is(tmp_path):
    # The 2016 archives hold one .ckpt file in TF1's first format (no .index).
    prefix = str(tmp_path / 'inception_v3.ckpt')
    tf.raw_ops.Save(filename=prefix, tensor_names=['InceptionV3/Logits/biases'],
                    data=[tf.ones([5])])
    assert restore.resolve_checkpoint(prefix) == prefix
    with pytest.raises(UsageError, match='does not exist'):
        restore.resolve_checkpoint(str(tmp_path / 'resnet_v1_50.ckpt'))
    (tmp_path / 'not_a_checkpoint.ckpt').write_text('hello')
    with pytest.raises(UsageError, match='does not exist'):
        restore.resolve_checkpoint(str(tmp_path / 'not_a_checkpoint.ckpt'))
