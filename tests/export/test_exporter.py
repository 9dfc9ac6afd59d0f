import numpy as np
import tensorflow as tf

from helpers import testing_utils

from export import exporter

CIFARNET = exporter.ServingInfo(input_shape=(32, 32, 3), labels_offset=1)


def test_saved_model_serves_the_networks_outputs(tmp_path):
    net = testing_utils.built_cifarnet()
    images, _ = testing_utils.cifar_sized_examples(4)
    expected = net(images, training=False)[0].numpy()
    exporter.export_saved_model(net, str(tmp_path / 'export'), CIFARNET)
    loaded = tf.saved_model.load(str(tmp_path / 'export'))
    # Without preprocessing (as video nets): preprocessed inputs only, under both names.
    assert sorted(loaded.signatures) == ['serving_default', 'serving_preprocessed']
    serve = loaded.signatures['serving_default']
    assert list(serve.structured_input_signature[1]) == [exporter.INPUT_NAME]
    outputs = serve(images=tf.constant(images))
    assert sorted(outputs) == sorted(exporter.OUTPUT_NAMES)
    np.testing.assert_allclose(outputs['logits'].numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outputs['probabilities'].numpy().sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(outputs['classes'].numpy(), expected.argmax(-1) + 1)


def test_frozen_graph_has_slim_input_placeholder_and_same_outputs(tmp_path):
    net = testing_utils.built_cifarnet()
    images, _ = testing_utils.cifar_sized_examples(2)
    expected = net(images, training=False)[0].numpy()
    graph_def = exporter.frozen_graph_def(net, CIFARNET, batch_size=2)
    path = str(tmp_path / 'graph.pb')
    exporter.write_graph_def(graph_def, path)
    loaded = tf.compat.v1.GraphDef.FromString(open(path, 'rb').read())
    placeholders = [n for n in loaded.node if n.op == 'Placeholder']
    assert [n.name for n in placeholders] == ['input']
    assert not any(n.op in ('VarHandleOp', 'ReadVariableOp') for n in loaded.node)
    run = tf.compat.v1.wrap_function(
        lambda: tf.compat.v1.import_graph_def(loaded, name=''), []).prune(
            'input:0', ['logits:0', 'classes:0'])
    logits, classes = run(tf.constant(images))
    np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(classes.numpy(), expected.argmax(-1) + 1)


def test_class_names_follow_the_classes_in_the_datasets_numbering(tmp_path):
    net = testing_utils.built_cifarnet(num_classes=3)
    serving = exporter.ServingInfo(input_shape=(32, 32, 3), labels_offset=1,
                                   class_names={0: 'background', 1: 'a', 2: 'b', 3: 'c'})
    images, _ = testing_utils.cifar_sized_examples(8)
    run = exporter.graph_def_function(exporter.frozen_graph_def(net, serving),
                                      ('classes', 'class_names'))
    classes, names = run(tf.constant(images))
    assert [n.decode() for n in names.numpy()] == ['abc'[c - 1] for c in classes.numpy()]


def test_text_graph_def_reads_back(tmp_path):
    graph_def = exporter.inference_graph_def(testing_utils.built_cifarnet(), CIFARNET)
    path = str(tmp_path / 'graph.pbtxt')
    exporter.write_graph_def(graph_def, path, as_text=True)
    assert open(path).read().startswith('node {')
    assert exporter.read_graph_def(path, as_text=True) == graph_def
