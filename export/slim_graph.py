"""TF-Slim's inference graph and checkpoint: what slim's freeze_graph flow needs.

TF-Slim's export_inference_graph.py wrote a graph whose variables are nodes named by
the variables, without values; freeze_graph restored a checkpoint into them by name,
folded them into constants and kept the nodes named by --output_node_names. A
tf.function's GraphDef holds resource placeholders named after the ops reading them
('CifarNet/convolution/ReadVariableOp/resource') instead: nothing a checkpoint can be
restored into. Here those placeholders become TF1 variable nodes (VariableV2, what
freeze_graph restores into) under TF-Slim's variable names, and TF-Slim's output nodes
and end points are added as Identity nodes under TF-Slim's names.
"""
import os
from typing import Dict, Mapping, Sequence, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import graph_pb2  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-direct-tensorflow-import

from core.naming import slim_name

# Net scope -> (slim's logits op, slim's predictions op): the node names TF-Slim users
# pass to freeze_graph, label_image and the TFLite converter. VGG, AlexNet and OverFeat
# had no predictions op. NASNet and PNASNet ('') build at the root.
_OUTPUT_NODES = {
    'LeNet': ('LeNet/fc4/BiasAdd', 'Predictions/Reshape_1'),
    'CifarNet': ('CifarNet/logits/BiasAdd', 'CifarNet/Predictions/Reshape_1'),
    'alexnet_v2': ('alexnet_v2/fc8/squeezed', None),
    'overfeat': ('overfeat/fc8/squeezed', None),
    'vgg_a': ('vgg_a/fc8/squeezed', None),
    'vgg_16': ('vgg_16/fc8/squeezed', None),
    'vgg_19': ('vgg_19/fc8/squeezed', None),
    'InceptionV1': ('InceptionV1/Logits/SpatialSqueeze',
                    'InceptionV1/Logits/Predictions/Reshape_1'),
    'InceptionV2': ('InceptionV2/Logits/SpatialSqueeze', 'InceptionV2/Predictions/Reshape_1'),
    'InceptionV3': ('InceptionV3/Logits/SpatialSqueeze', 'InceptionV3/Predictions/Reshape_1'),
    'InceptionV4': ('InceptionV4/Logits/Logits/BiasAdd', 'InceptionV4/Logits/Predictions'),
    'InceptionResnetV2': ('InceptionResnetV2/Logits/Logits/BiasAdd',
                          'InceptionResnetV2/Logits/Predictions'),
    'MobilenetV1': ('MobilenetV1/Logits/SpatialSqueeze', 'MobilenetV1/Predictions/Reshape_1'),
    'MobilenetV2': ('MobilenetV2/Logits/output', 'MobilenetV2/Predictions/Reshape_1'),
    'MobilenetV3': ('MobilenetV3/Logits/output', 'MobilenetV3/Predictions/Reshape_1'),
    'MobilenetEdgeTPU': ('MobilenetEdgeTPU/Logits/output',
                         'MobilenetEdgeTPU/Predictions/Reshape_1'),
    '': ('final_layer/FC/BiasAdd', 'final_layer/predictions'),
    **{f'resnet_v{version}_{depth}': (f'resnet_v{version}_{depth}/SpatialSqueeze',
                                      f'resnet_v{version}_{depth}/predictions/Reshape_1')
       for version in (1, 2) for depth in (50, 101, 152, 200)},
}
_PREDICTIONS_KEYS = ('Predictions', 'predictions')  # resnets' end point is lowercase
_VARIABLE_OPS = ('VarHandleOp', 'VariableV2', 'Variable')
INPUT_NAME = 'input'  # slim's placeholder


def output_nodes(scope: str) -> Tuple[str, ...]:
    """TF-Slim's logits and (where it had one) predictions node of the net `scope`."""
    return tuple(name for name in _OUTPUT_NODES.get(scope, ()) if name)


def end_point_node(scope: str, key: str) -> str:
    """'InceptionV3', 'PreLogits' -> 'InceptionV3/PreLogits'; keys already under the
    scope ('resnet_v1_50/block4') stay as they are."""
    return key if not scope or key.startswith(scope + '/') else f'{scope}/{key}'


def named_tensors(scope: str, logits, end_points: Mapping) -> Dict[str, tf.Tensor]:
    """A forward pass's logits, predictions and end points under TF-Slim's node names."""
    if isinstance(logits, (list, tuple)):
        logits = logits[0]
    named = {end_point_node(scope, key): value for key, value in end_points.items()
             if isinstance(value, tf.Tensor)}
    logits_node, predictions_node = _OUTPUT_NODES.get(scope, (None, None))
    if logits_node:
        named[logits_node] = logits
    if predictions_node:
        found = [end_points[key] for key in _PREDICTIONS_KEYS if key in end_points]
        named[predictions_node] = found[0] if found else tf.nn.softmax(logits)
    return named


def _traced(network, outputs_fn, input_spec, training: bool):
    """The inference function: outputs_fn(net, images, training=) -> {name: tensor}, plus
    from the same forward pass the logits, predictions and end points under TF-Slim's
    node names. Returns it traced, and the names outputs_fn gave."""
    named, ours = {}, set()

    def forward(images, training):
        logits, end_points = network(images, training=training)
        named.update(named_tensors(network.relative_name, logits, end_points))
        return logits, end_points

    @tf.function
    def infer(images):
        named.clear()
        result = outputs_fn(forward, images, training=training)
        ours.update(result)
        return {**named, **result}

    return infer.get_concrete_function(input_spec), tuple(sorted(ours))


def _slim_names(concrete, tensor_names: Sequence[str], ours: Sequence[str]):
    """{TF-Slim node name: (tensor name, dtype)} of concrete's outputs, given the names
    its flat outputs (tf.nest's order: a dict's sorted keys) have in the graph written."""
    keys = sorted(concrete.structured_outputs)
    return {key: (name, tensor.dtype) for key, tensor, name in
            zip(keys, concrete.outputs, tensor_names) if key not in ours}


def frozen_graph_def(network, outputs_fn, input_spec) -> graph_pb2.GraphDef:
    """The inference graph, weights folded into constants, with outputs_fn's nodes and
    TF-Slim's (its predictions node, logits and end points)."""
    concrete, ours = _traced(network, outputs_fn, input_spec, training=False)
    frozen = convert_to_constants.convert_variables_to_constants_v2(concrete)
    names = _slim_names(concrete, [tensor.name for tensor in frozen.outputs], ours)
    return add_named_nodes(frozen.graph.as_graph_def(), names, protected=ours)


def inference_graph_def(network, outputs_fn, input_spec,
                        training: bool = False) -> graph_pb2.GraphDef:
    """The graph before freezing, as slim's export_inference_graph wrote it: variable
    nodes under TF-Slim's names, without values, for freeze_graph to restore a
    checkpoint into; outputs_fn's nodes and TF-Slim's."""
    concrete, ours = _traced(network, outputs_fn, input_spec, training)
    names = _slim_names(concrete, [tensor.name for tensor in concrete.outputs], ours)
    return add_named_nodes(variable_graph_def(concrete, network.variables), names,
                           protected=ours)


# Resource-variable ops -> their TF1 twins on a variable node.
_TF1_TWINS = {'ReadVariableOp': 'Identity', 'AssignVariableOp': 'Assign',
              'AssignAddVariableOp': 'AssignAdd', 'AssignSubVariableOp': 'AssignSub'}


def _as_variable_node(node, name: str, variable):
    node.Clear()
    node.name, node.op = name, 'VariableV2'
    node.attr['dtype'].type = variable.dtype.as_datatype_enum
    node.attr['shape'].shape.CopyFrom(variable.shape.as_proto())
    node.attr['container'].s = node.attr['shared_name'].s = b''


def _as_tf1_twin(node, variable_input: int):
    """A resource op on a variable (its input 0) -> the same op on the TF1 variable."""
    if node.op not in _TF1_TWINS or variable_input != 0:
        raise ValueError(f'{node.op} {node.name!r} uses variable {node.input[variable_input]!r}'
                         f' in a way a TF1 graph cannot express.')
    dtype = node.attr['dtype'].type
    for key in [key for key in node.attr if not key.startswith('_')]:
        del node.attr[key]
    node.op = _TF1_TWINS[node.op]
    node.attr['T'].type = dtype


def variable_graph_def(concrete, variables) -> graph_pb2.GraphDef:
    """`concrete`'s graph with the variables it reads as TF1 variable nodes (VariableV2)
    named as TF-Slim names them: what freeze_graph restores a checkpoint into by name
    (it cannot restore into a VarHandleOp). Reads become Identity nodes, updates their
    TF1 twins."""
    by_handle = {id(variable.handle): variable for variable in variables}
    replaced = {}  # placeholder of a captured handle -> its variable
    for external, internal in concrete.graph.captures:
        if id(external) not in by_handle:
            raise ValueError(f'The inference function reads {internal.name}, which is '
                             f'not one of the network\'s variables.')
        replaced[internal.op.name] = by_handle[id(external)]
    graph_def = concrete.graph.as_graph_def()
    taken = {node.name for node in graph_def.node}
    names = {placeholder: slim_name(variable) for placeholder, variable in replaced.items()}
    clashes = sorted(set(names.values()) & taken)
    if clashes or len(set(names.values())) < len(names):
        raise ValueError(f'Variable names clash with other nodes: {clashes[:5]}.')
    for node in graph_def.node:
        if node.name in replaced:
            _as_variable_node(node, names[node.name], replaced[node.name])
            continue
        for i, source in enumerate(node.input):
            placeholder = source.lstrip('^')
            if placeholder not in names:
                continue
            node.input[i] = source.replace(placeholder, names[placeholder])
            if not source.startswith('^'):
                _as_tf1_twin(node, i)
        if '_class' in node.attr:
            node.attr['_class'].list.s[:] = [_relocated(entry, names)
                                             for entry in node.attr['_class'].list.s]
    return graph_def


def _relocated(entry: bytes, replaced: Mapping[str, str]) -> bytes:
    """b'loc:@<placeholder>' -> b'loc:@<variable>'."""
    prefix = b'loc:@'
    if not entry.startswith(prefix):
        return entry
    name = entry[len(prefix):].decode()
    return prefix + replaced.get(name, name).encode()


def _input_name(tensor_name: str) -> str:
    """'node:0' -> 'node' (how a NodeDef names a node's first output)."""
    return tensor_name[:-2] if tensor_name.endswith(':0') else tensor_name


def _rename_node(graph_def, old: str, new: str):
    for node in graph_def.node:
        if node.name == old:
            node.name = new
        for i, source in enumerate(node.input):
            control, name = ('^', source[1:]) if source.startswith('^') else ('', source)
            base, colon, index = name.partition(':')
            if base == old:
                node.input[i] = f'{control}{new}{colon}{index}'


def add_named_nodes(graph_def, named: Mapping[str, Tuple[str, tf.DType]],
                    protected: Sequence[str] = ()) -> graph_pb2.GraphDef:
    """A copy of graph_def with an Identity node `name` for each {name: (tensor, dtype)}.

    A tensor returned through an Identity is named at its source. A node already named
    `name` is renamed out of the way, unless it is that very tensor.
    """
    result = graph_pb2.GraphDef()
    result.CopyFrom(graph_def)
    nodes = {node.name: node for node in result.node}
    for name, (tensor, dtype) in sorted(named.items()):
        source = _input_name(tensor)
        node = nodes.get(source)
        if node is not None and node.op == 'Identity' and not node.input[0].startswith('^'):
            source = node.input[0]  # a function's output: name what it returns
        if source == name:
            continue
        if name in nodes:
            if nodes[name].op in _VARIABLE_OPS or name in protected:
                raise ValueError(f'TF-Slim\'s node name {name!r} is taken by a variable '
                                 f'or an export output.')
            free = next(f'{name}_{i}' for i in range(1, len(nodes) + 2)
                        if f'{name}_{i}' not in nodes)
            _rename_node(result, name, free)
            nodes[free] = nodes.pop(name)
            if _input_name(source) == name:
                source = free + source[len(name):]
        added = result.node.add(name=name, op='Identity', input=[source])
        added.attr['T'].type = dtype.as_datatype_enum
        nodes[name] = added
    return result


def variable_names(graph_def) -> list:
    """The variable nodes' names: what freeze_graph restores from a checkpoint."""
    return [node.name for node in graph_def.node if node.op in _VARIABLE_OPS]


def graph_def_function(graph_def, variables, output_names: Sequence[str]):
    """images -> [outputs] of a GraphDef with variable nodes, its variables read from
    `variables` (matched by TF-Slim's names): what freezing it with their values gives."""
    by_name = {slim_name(variable): variable for variable in variables}
    in_graph = variable_names(graph_def)
    missing = [name for name in in_graph if name not in by_name]
    if missing:
        raise ValueError(f'The graph has variables the network lacks: {missing[:5]}.')

    def imported():
        tf.graph_util.import_graph_def(graph_def, name='', input_map={
            f'{name}:0': by_name[name].read_value() for name in in_graph})

    return tf.compat.v1.wrap_function(imported, []).prune(
        f'{INPUT_NAME}:0', [f'{name}:0' for name in output_names])


def run_batched(run, images: np.ndarray, batch_size=None, default_batch: int = 16):
    """run's first output on images, in batches of batch_size (the last one padded when
    the graph's batch is fixed)."""
    size = batch_size or default_batch
    results = []
    for start in range(0, len(images), size):
        batch = images[start:start + size]
        count = len(batch)
        if batch_size and count < size:
            batch = np.concatenate([batch, np.zeros((size - count, *batch.shape[1:]),
                                                    batch.dtype)])
        results.append(np.asarray(run(tf.constant(batch))[0])[:count])
    return np.concatenate(results)


CHECKPOINT_PREFIX = 'model.ckpt'


def write_checkpoint(variables, directory: str) -> str:
    """A TF1 name-based checkpoint of `variables` under TF-Slim's names (as slim's
    model zoo ships them), <directory>/model.ckpt, with a 'checkpoint' state file.
    Returns its prefix."""
    tf.io.gfile.makedirs(directory)
    prefix = os.path.join(directory, CHECKPOINT_PREFIX)
    names = [slim_name(variable) for variable in variables]
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[''] * len(names),
                      tensors=[variable.read_value() for variable in variables])
    with tf.io.gfile.GFile(os.path.join(directory, 'checkpoint'), 'w') as f:
        f.write(f'model_checkpoint_path: "{CHECKPOINT_PREFIX}"\n'
                f'all_model_checkpoint_paths: "{CHECKPOINT_PREFIX}"\n')
    return prefix


def checkpoint_differences(prefix: str, variables) -> list:
    """Variables whose value in the name-based checkpoint differs from theirs (or is
    missing): [] when it holds exactly them."""
    reader = tf.train.load_checkpoint(prefix)
    stored = reader.get_variable_to_shape_map()
    return [name for name, variable in ((slim_name(v), v) for v in variables)
            if name not in stored
            or not np.array_equal(reader.get_tensor(name), variable.numpy())]
