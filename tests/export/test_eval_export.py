import json

import numpy as np
import pytest
import tensorflow as tf

from export import exporter
from training import eval_loop
from nets import nets_factory


def _network():
    net = nets_factory.get_network_fn('cifarnet', 10)
    net.build((32, 32, 3))
    return net


def _examples(count=23, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(count, 32, 32, 3)).astype(np.float32),
            rng.integers(0, 10, count).astype(np.int64))


@pytest.mark.parametrize('batch_size', [1, 5, 23, 100])
def test_evaluation_counts_every_example_once_whatever_the_batch(batch_size):
    net = _network()
    images, labels = _examples()
    logits = net(images, training=False)[0].numpy()
    expected_top1 = np.mean(logits.argmax(-1) == labels)
    ranks = (logits > logits[np.arange(len(labels)), labels][:, None]).sum(-1)
    expected_top5 = np.mean(ranks < 5)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(batch_size)
    metrics = eval_loop.evaluate(net, dataset, num_examples=len(labels))
    assert metrics['num_examples'] == 23
    assert metrics['Accuracy'] == pytest.approx(expected_top1)
    assert metrics['Recall_5'] == pytest.approx(expected_top5)
    assert 0 < expected_top5 < 1  # the data distinguishes top-5 from top-1 and all


def test_max_num_batches_limits_the_pass():
    images, labels = _examples()
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(5)
    assert eval_loop.evaluate(_network(), dataset, max_num_batches=2)['num_examples'] == 10


def test_report_prints_writes_json_and_tensorboard(tmp_path, capsys):
    metrics = {'Accuracy': 0.91234, 'Recall_5': 0.99, 'num_examples': 10}
    eval_loop.report(metrics, str(tmp_path), global_step=42)
    out = capsys.readouterr().out.splitlines()
    assert out == ['eval/Accuracy: 0.9123', 'eval/Recall_5: 0.9900']
    record = json.loads((tmp_path / 'metrics.json').read_text())
    assert record == {'Accuracy': 0.91234, 'Recall_5': 0.99, 'num_examples': 10,
                      'global_step': 42}
    tags = set()
    for event_file in tf.io.gfile.glob(str(tmp_path / 'events.out.tfevents.*')):
        for raw in tf.data.TFRecordDataset(event_file):
            event = tf.compat.v1.Event.FromString(raw.numpy())
            tags.update((v.tag, event.step) for v in event.summary.value)
    assert {('eval/Accuracy', 42), ('eval/Recall_5', 42)} <= tags


def test_saved_model_serves_the_networks_outputs(tmp_path):
    net = _network()
    images, _ = _examples(4)
    expected = net(images, training=False)[0].numpy()
    exporter.export_saved_model(net, str(tmp_path / 'export'), image_size=32,
                                labels_offset=1)
    loaded = tf.saved_model.load(str(tmp_path / 'export'))
    serve = loaded.signatures['serving_default']
    assert list(serve.structured_input_signature[1]) == [exporter.INPUT_NAME]
    outputs = serve(images=tf.constant(images))
    assert sorted(outputs) == sorted(exporter.OUTPUT_NAMES)
    np.testing.assert_allclose(outputs['logits'].numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outputs['probabilities'].numpy().sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(outputs['classes'].numpy(), expected.argmax(-1) + 1)


def test_frozen_graph_has_slim_input_placeholder_and_same_outputs(tmp_path):
    net = _network()
    images, _ = _examples(2)
    expected = net(images, training=False)[0].numpy()
    graph_def = exporter.frozen_graph_def(net, image_size=32, batch_size=2)
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
    np.testing.assert_array_equal(classes.numpy(), expected.argmax(-1))
