"""TF-Slim's inference graph: variable nodes under slim's names that TensorFlow's own
freeze_graph restores a name-based checkpoint into, slim's output nodes and end points,
in every graph written (unfrozen and frozen), for every net."""
import concurrent.futures

import numpy as np
import pytest
import tensorflow as tf
from helpers import slim_export, testing_utils

from core.naming import slim_name
from export import exporter, slim_graph
from nets import nets_factory

# Cheap enough for the default suite; the rest of the 40 nets run with `make test-slow`.
CHEAP = ('lenet', 'cifarnet', 'mobilenet_v1_025')


def _net(model_name, num_classes, values=True):
    """The net, with slim_reference's deterministic weights when values."""
    net = nets_factory.get_network_fn(model_name, num_classes)
    net.build(net.spec.input_shape())
    if values:
        for variable in net.variables:
            variable.assign(testing_utils.golden_weight_value(slim_name(variable),
                                                              variable.shape))
    return net


def _serving(net, **kwargs):
    return exporter.ServingInfo(input_shape=net.spec.input_shape(), **kwargs)


def _inputs(net, count=2):
    shape = net.spec.input_shape()
    return np.random.default_rng(0).uniform(-1, 1, (count, *shape)).astype(np.float32)


def _end_point_nodes(net, end_points):
    return [slim_graph.end_point_node(net.relative_name, key) for key in end_points]


def test_output_node_names_are_slims_for_every_net():
    for model_name, nodes in slim_export.OUTPUT_NODES.items():
        scope = nets_factory.get_network_fn(model_name, 10).relative_name
        expected = tuple(name for name in (nodes['logits_op'], nodes['predictions_op'])
                         if name)
        assert slim_graph.output_nodes(scope) == expected, model_name


def test_unfrozen_graph_holds_slims_variables_input_and_names():
    net = _net('cifarnet', 10, values=False)
    graph_def = exporter.inference_graph_def(net, _serving(net), batch_size=2)
    ops = {node.name: node for node in graph_def.node}
    assert sorted(slim_graph.variable_names(graph_def)) == sorted(
        slim_name(v) for v in net.variables)
    assert {ops[slim_name(v)].op for v in net.variables} == {'VariableV2'}
    assert not any(node.attr['dtype'].type == tf.resource.as_datatype_enum
                   for node in graph_def.node)  # no resource placeholders left
    placeholders = [node for node in graph_def.node if node.op == 'Placeholder']
    assert [node.name for node in placeholders] == ['input']
    assert tf.TensorShape(placeholders[0].attr['shape'].shape) == [2, 32, 32, 3]
    _, end_points = net(tf.zeros([1, 32, 32, 3]))
    expected = [*slim_graph.output_nodes('CifarNet'), *exporter.OUTPUT_NAMES,
                *_end_point_nodes(net, end_points)]
    assert not [name for name in expected if name not in ops]


def test_training_graph_updates_batch_norm_with_tf1_ops():
    net = _net('mobilenet_v1_025', 10, values=False)
    graph_def = exporter.inference_graph_def(net, _serving(net), training=True)
    assert {'AssignSub'} <= {node.op for node in graph_def.node}
    with tf.Graph().as_default():  # it imports: every node valid
        tf.graph_util.import_graph_def(graph_def, name='')


def test_frozen_graph_carries_slims_names_and_values():
    net = _net('mobilenet_v1_025', 10)
    graph_def = exporter.frozen_graph_def(net, _serving(net))
    images = _inputs(net)
    logits, end_points = net(images, training=False)
    run = exporter.graph_def_function(graph_def, (
        'MobilenetV1/Logits/SpatialSqueeze', 'MobilenetV1/Predictions/Reshape_1',
        'MobilenetV1/Conv2d_13_pointwise', 'logits'))
    slim_logits, predictions, features, ours = [t.numpy() for t in run(tf.constant(images))]
    assert slim_export.relative_difference(slim_logits, logits.numpy()) <= 1e-5
    assert slim_export.relative_difference(predictions,
                                           end_points['Predictions'].numpy()) <= 1e-5
    assert slim_export.relative_difference(
        features, end_points['Conv2d_13_pointwise'].numpy()) <= 1e-5
    np.testing.assert_array_equal(ours, slim_logits)
    assert not slim_graph.variable_names(graph_def)


def test_a_node_in_the_way_of_a_slim_name_is_renamed():
    graph = tf.Graph()
    with graph.as_default():
        value = tf.constant([1.0, 2.0], name='value')
        tf.identity(value * 2, name='Net/Predictions')  # another tensor under the name
        tf.identity(value, name='returned')
    named = slim_graph.add_named_nodes(graph.as_graph_def(), {
        'Net/Predictions': ('value:0', tf.float32),
        'Net/Logits': ('returned:0', tf.float32),  # named at its source: 'value'
        'value': ('value:0', tf.float32)})  # already that node: nothing added
    nodes = {node.name: node for node in named.node}
    assert nodes['Net/Predictions'].input == ['value']
    assert nodes['Net/Predictions_1'].input == ['mul']
    assert nodes['Net/Logits'].input == ['value']
    assert nodes['value'].op == 'Const'
    with pytest.raises(ValueError, match='taken by a variable or an export output'):
        slim_graph.add_named_nodes(named, {'returned': ('value:0', tf.float32)},
                                   protected=('returned',))


def test_name_based_checkpoint_holds_the_variables_under_slims_names(tmp_path):
    net = _net('lenet', 10)
    prefix = slim_graph.write_checkpoint(net.variables, str(tmp_path / 'slim'))
    assert tf.train.latest_checkpoint(str(tmp_path / 'slim')) == prefix
    assert sorted(name for name, _ in tf.train.list_variables(prefix)) == sorted(
        slim_name(v) for v in net.variables)
    assert slim_graph.checkpoint_differences(prefix, net.variables) == []
    net.variables[0].assign_add(tf.ones_like(net.variables[0]))
    assert slim_graph.checkpoint_differences(prefix, net.variables) == [
        slim_name(net.variables[0])]


def _freeze_and_compare(model_name, num_classes, directory):
    """slim's flow: the unfrozen graph, a TF1 name-based checkpoint, freeze_graph run as
    a subprocess; returns (frozen nodes, {node: relative difference to the net})."""
    net = _net(model_name, num_classes)
    graph = str(directory / 'inference_graph.pb')
    exporter.write_graph_def(exporter.inference_graph_def(net, _serving(net)), graph)
    checkpoint = testing_utils.write_tf1_checkpoint(
        directory / 'model.ckpt', {slim_name(v): v.numpy() for v in net.variables})
    nodes = slim_export.OUTPUT_NODES[model_name]
    names = [name for name in (nodes['logits_op'], nodes['predictions_op']) if name]
    frozen = str(directory / 'frozen.pb')
    result = slim_export.freeze_graph(graph, checkpoint, frozen, names)
    assert result.returncode == 0, result.stderr[-3000:]
    images = _inputs(net, 1 if net.spec.num_frames else 2)
    logits, end_points = net(images, training=False)
    expected = {nodes['logits_op']: logits.numpy()}
    if nodes['predictions_op']:
        key = 'Predictions' if 'Predictions' in end_points else 'predictions'
        expected[nodes['predictions_op']] = end_points[key].numpy()
    values = slim_export.run_frozen(frozen, names, images)
    with open(frozen, 'rb') as f:
        frozen_nodes = {n.name for n in tf.compat.v1.GraphDef.FromString(f.read()).node}
    return frozen_nodes, {name: slim_export.relative_difference(value, expected[name])
                          for name, value in zip(names, values)}


def test_freeze_graph_freezes_it_with_a_slim_checkpoint(tmp_path):
    """The cheap nets side by side (freeze_graph is a process each)."""
    def run(model_name):
        (tmp_path / model_name).mkdir()
        return _freeze_and_compare(model_name, 10, tmp_path / model_name)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = dict(zip(CHEAP, pool.map(run, CHEAP)))
    for model_name, (nodes, differences) in outcomes.items():
        assert slim_export.output_node(model_name) in nodes
        assert max(differences.values()) <= 1e-5, (model_name, differences)


@pytest.mark.slow
@pytest.mark.parametrize('model_name', [name for name in slim_export.OUTPUT_NODES
                                        if name not in CHEAP])
def test_every_net_freezes_with_slims_output_node(model_name, slim_nets, tmp_path):
    # Batch norm on slim_reference's random statistics makes some logits huge (1e5):
    # the float error of a long net is relative to them, as in tests/nets.
    nodes, differences = _freeze_and_compare(
        model_name, slim_nets[model_name]['num_classes'], tmp_path)
    assert slim_export.output_node(model_name) in nodes
    assert differences[slim_export.OUTPUT_NODES[model_name]['logits_op']] <= 1e-4
