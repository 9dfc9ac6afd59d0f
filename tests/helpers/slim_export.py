"""TF-Slim's export flow in tests: its output node names (slim_reference), TensorFlow's
freeze_graph run as slim's README runs it, and a frozen graph run by node name."""
import json
import os
import subprocess
import sys

from helpers import testing_utils

# model name -> {'logits_op': ..., 'predictions_op': ... or None}, from slim's own graphs.
OUTPUT_NODES = json.loads(
    (testing_utils.TEST_DATA / 'slim_reference' / 'output_nodes.json').read_text())


def output_node(model_name):
    """The node slim's users freeze and run: its predictions, else (VGG...) its logits."""
    nodes = OUTPUT_NODES[model_name]
    return nodes['predictions_op'] or nodes['logits_op']


def freeze_graph(input_graph, input_checkpoint, output_graph, output_node_names,
                 binary=True, timeout=900):
    """python -m tensorflow.python.tools.freeze_graph ...; the CompletedProcess."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
    return subprocess.run(
        [sys.executable, '-m', 'tensorflow.python.tools.freeze_graph',
         f'--input_graph={input_graph}', f'--input_checkpoint={input_checkpoint}',
         f'--input_binary={str(binary).lower()}', f'--output_graph={output_graph}',
         f'--output_node_names={",".join(output_node_names)}'],
        capture_output=True, text=True, timeout=timeout, env=env)


def run_frozen(path, node_names, images):
    """The frozen GraphDef at `path` fed `images` at 'input:0': each node's value."""
    import tensorflow as tf
    with open(path, 'rb') as f:
        graph_def = tf.compat.v1.GraphDef.FromString(f.read())
    run = tf.compat.v1.wrap_function(
        lambda: tf.compat.v1.import_graph_def(graph_def, name=''), []).prune(
            'input:0', [f'{name}:0' for name in node_names])
    return [value.numpy() for value in run(tf.constant(images))]


def relative_difference(values, expected):
    import numpy as np
    return float(np.abs(values - expected).max() / max(np.abs(expected).max(), 1e-12))
