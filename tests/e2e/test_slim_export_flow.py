"""TF-Slim's export flow as its README runs it: export_inference_graph.py without a
checkpoint writes the inference graph, TensorFlow's freeze_graph freezes it with a
checkpoint by name, and label_image-style runs feed 'input' and read slim's output node.
The same with the toolkit's own (object-based) checkpoints, through the name-based
copy the export writes (slim_checkpoint), and directly with --checkpoint_path."""
import concurrent.futures

import pytest
import tensorflow as tf
from helpers import slim_export, testing_utils
from helpers.scripts import EXPORT, TRAIN, run_script

from core.naming import slim_name
from export import exporter
from nets import nets_factory
from training.checkpoints import restore

PREDICTIONS = 'CifarNet/Predictions/Reshape_1'


def _built_cifarnet():
    net = nets_factory.get_network_fn('cifarnet', 10)
    net.build((32, 32, 3))
    return net


def _parallel(*jobs):
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return [future.result() for future in [pool.submit(*job) for job in jobs]]


@pytest.fixture(scope='module')
def flow(tmp_path_factory):
    work = tmp_path_factory.mktemp('slim_export')
    values = {slim_name(v): testing_utils.golden_weight_value(slim_name(v), v.shape)
              for v in _built_cifarnet().variables}  # a model-zoo stand-in's weights
    slim_checkpoint = testing_utils.write_tf1_checkpoint(work / 'zoo' / 'model.ckpt', values)
    testing_utils.write_small_shapes(str(work / 'shapes'), num_train=8, num_validation=4)
    slim_model = ['--model_name=cifarnet', '--dataset_name=cifar10']
    ours = ['--model_name=cifarnet', '--dataset_name=shapes']
    graph, text_graph = work / 'cifarnet_inf_graph.pb', work / 'cifarnet_inf_graph.pbtxt'
    runs = dict(zip(['export', 'export_text', 'train'], _parallel(
        (run_script, EXPORT, *slim_model, f'--output_file={graph}', '--batch_size=2'),
        (run_script, EXPORT, *slim_model, f'--output_file={text_graph}',
         '--write_text_graphdef'),
        (run_script, TRAIN, *ours, f'--dataset_dir={work / "shapes"}', '--batch_size=4',
         '--max_number_of_steps=1', f'--train_dir={work / "train"}'))))
    runs.update(zip(['freeze', 'freeze_text', 'export_ours'], _parallel(
        (slim_export.freeze_graph, graph, slim_checkpoint, work / 'frozen.pb', [PREDICTIONS]),
        (slim_export.freeze_graph, text_graph, slim_checkpoint, work / 'frozen_text.pb',
         [PREDICTIONS], False),
        (run_script, EXPORT, *ours, f'--checkpoint_path={work / "train"}',
         f'--export_dir={work / "ours"}',
         '--export_format=graphdef,frozen_graph,slim_checkpoint'))))
    runs.update(zip(['freeze_ours', 'freeze_object_checkpoint'], _parallel(
        (slim_export.freeze_graph, work / 'ours' / 'inference_graph.pb',
         work / 'ours' / 'slim_checkpoint' / 'model.ckpt', work / 'frozen_ours.pb',
         [PREDICTIONS]),
        (slim_export.freeze_graph, work / 'ours' / 'inference_graph.pb',
         tf.train.latest_checkpoint(str(work / 'train')), work / 'never.pb',
         [PREDICTIONS]))))
    return dict(work=work, runs=runs, slim_checkpoint=slim_checkpoint)


def _ok(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _predictions(checkpoint, images):
    """The net's predictions in process, its weights restored from `checkpoint`."""
    net = _built_cifarnet()
    restore.restore_network(net, str(checkpoint))
    return net(images, training=False)[1]['Predictions'].numpy()


def test_export_without_checkpoint_writes_slims_inference_graph(flow):
    result = _ok(flow['runs']['export'])
    assert 'freshly initialised' not in result.stderr
    assert 'parity graphdef: max |logit diff|' in result.stdout
    graph_def = exporter.read_graph_def(str(flow['work'] / 'cifarnet_inf_graph.pb'))
    nodes = {node.name: node for node in graph_def.node}
    assert nodes['CifarNet/conv1/weights'].op == 'VariableV2'
    assert tf.TensorShape(nodes['input'].attr['shape'].shape) == [2, 32, 32, 3]
    assert {PREDICTIONS, 'CifarNet/Logits', 'CifarNet/Predictions'} <= set(nodes)
    text = (flow['work'] / 'cifarnet_inf_graph.pbtxt').read_text()
    assert text.startswith('node {') and 'VariableV2' in text


@pytest.mark.parametrize('frozen', ['frozen.pb', 'frozen_text.pb'])
def test_freeze_graph_with_a_slim_checkpoint_computes_the_net(flow, frozen):
    _ok(flow['runs']['export_text'])
    _ok(flow['runs']['freeze' if frozen == 'frozen.pb' else 'freeze_text'])
    images = testing_utils.golden_input(32)
    (predictions,) = slim_export.run_frozen(flow['work'] / frozen, [PREDICTIONS], images)
    expected = _predictions(flow['slim_checkpoint'], images)
    assert slim_export.relative_difference(predictions, expected) <= 1e-5


def test_our_checkpoint_freezes_through_its_name_based_copy(flow):
    _ok(flow['runs']['train'])
    exported = _ok(flow['runs']['export_ours'])
    assert 'parity slim_checkpoint: 10 variables under TF-Slim' in exported.stdout
    _ok(flow['runs']['freeze_ours'])
    images = testing_utils.golden_input(32)
    expected = _predictions(flow['work'] / 'train', images)
    for frozen in ('frozen_ours.pb', 'ours/frozen_graph.pb'):  # freeze_graph's, ours
        (predictions,) = slim_export.run_frozen(flow['work'] / frozen, [PREDICTIONS], images)
        assert slim_export.relative_difference(predictions, expected) <= 1e-5, frozen


def test_freeze_graph_cannot_read_an_object_checkpoint_itself(flow):
    """Why slim_checkpoint exists: freeze_graph matches checkpoint keys to node names,
    and an object checkpoint's keys are object paths (docs/export.md)."""
    result = flow['runs']['freeze_object_checkpoint']
    assert result.returncode != 0 and 'No variables to save' in result.stderr
    assert not (flow['work'] / 'never.pb').exists()
