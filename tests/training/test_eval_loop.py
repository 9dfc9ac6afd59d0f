import datetime
import json

import numpy as np
import pytest
import tensorflow as tf

import testing_utils

from training import eval_loop


@pytest.mark.parametrize('batch_size', [1, 5, 23, 100])
def test_evaluation_counts_every_example_once_whatever_the_batch(batch_size):
    net = testing_utils.built_cifarnet()
    images, labels = testing_utils.cifar_sized_examples()
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
    images, labels = testing_utils.cifar_sized_examples()
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(5)
    assert eval_loop.evaluate(testing_utils.built_cifarnet(), dataset, max_num_batches=2)['num_examples'] == 10


def test_report_prints_writes_json_and_tensorboard(tmp_path, capsys):
    metrics = {'Accuracy': 0.91234, 'Recall_5': 0.99, 'num_examples': 10}
    evaluated = dict(checkpoint='/train/model.ckpt-42', model_name='cifarnet',
                     dataset_name='shapes', split_name='validation')
    eval_loop.report(metrics, str(tmp_path),
                     eval_loop.EvaluationRecord(global_step=42, **evaluated))
    eval_loop.report(dict(metrics, Accuracy=0.95), str(tmp_path),
                     eval_loop.EvaluationRecord(global_step=50, **evaluated))
    out = capsys.readouterr().out.splitlines()
    assert out == ['eval/Accuracy: 0.9123', 'eval/Recall_5: 0.9900',
                   'eval/Accuracy: 0.9500', 'eval/Recall_5: 0.9900']
    history = [json.loads(line)
               for line in (tmp_path / 'metrics.jsonl').read_text().splitlines()]
    assert [(r['global_step'], r['Accuracy']) for r in history] == [(42, 0.91234),
                                                                     (50, 0.95)]
    for record in history:
        time = record.pop('time')
        assert datetime.datetime.fromisoformat(time).tzinfo is not None
        assert record == dict(metrics, Accuracy=record['Accuracy'],
                              global_step=record['global_step'], **evaluated)
    latest = json.loads((tmp_path / 'metrics.json').read_text())
    assert latest['global_step'] == 50 and latest['Accuracy'] == 0.95
    tags = set()
    for event_file in tf.io.gfile.glob(str(tmp_path / 'events.out.tfevents.*')):
        for raw in tf.data.TFRecordDataset(event_file):
            event = tf.compat.v1.Event.FromString(raw.numpy())
            tags.update((v.tag, event.step) for v in event.summary.value)
    assert {('eval/Accuracy', 42), ('eval/Recall_5', 42)} <= tags
