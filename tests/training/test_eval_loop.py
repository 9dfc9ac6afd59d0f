import dataclasses
import datetime
import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from helpers import testing_utils

from training.checkpoints import watch as watch_lib
from training.evaluation import evaluator as evaluator_lib


@pytest.mark.parametrize('batch_size', [1, 5, 23, 100])
def test_evaluation_counts_every_example_once_whatever_the_batch(batch_size):
    net = testing_utils.built_cifarnet()
    images, labels = testing_utils.cifar_sized_examples()
    logits = net(images, training=False)[0].numpy()
    expected_top1 = np.mean(logits.argmax(-1) == labels)
    ranks = (logits > logits[np.arange(len(labels)), labels][:, None]).sum(-1)
    expected_top5 = np.mean(ranks < 5)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(batch_size)
    metrics = evaluator_lib.evaluate(net, dataset, num_examples=len(labels))
    assert metrics['num_examples'] == 23
    assert metrics['Accuracy'] == pytest.approx(expected_top1)
    assert metrics['Recall_5'] == pytest.approx(expected_top5)
    assert 0 < expected_top5 < 1  # the data distinguishes top-5 from top-1 and all


@pytest.mark.parametrize('max_num_batches', [2, 3])
def test_max_num_batches_limits_the_pass(max_num_batches):
    """Batches are counted two per loop iteration: an odd limit still reads no more."""
    images, labels = testing_utils.cifar_sized_examples()
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(5)
    metrics = evaluator_lib.evaluate(testing_utils.built_cifarnet(), dataset,
                                 max_num_batches=max_num_batches)
    assert metrics['num_examples'] == 5 * max_num_batches


def test_count_only_leaves_the_iterator_after_the_batches_it_counted():
    evaluator = evaluator_lib.Evaluator(testing_utils.built_cifarnet(), num_classes=10)
    images, labels = testing_utils.cifar_sized_examples()
    iterator = evaluator.batches(tf.data.Dataset.from_tensor_slices(
        (images, labels)).batch(5), batch_size=5)
    assert evaluator.count_only(iterator, 3) == 3
    _, next_labels, *_ = next(iterator)
    np.testing.assert_array_equal(next_labels, labels[15:20])


def test_report_prints_writes_json_and_tensorboard(tmp_path, capsys):
    metrics = {'Accuracy': 0.91234, 'Recall_5': 0.99, 'num_examples': 10}
    evaluated = dict(checkpoint='/train/model.ckpt-42', model_name='cifarnet',
                     dataset_name='shapes', split_name='validation')
    evaluator_lib.report(metrics, str(tmp_path),
                     evaluator_lib.EvaluationRecord(global_step=42, **evaluated))
    evaluator_lib.report(dict(metrics, Accuracy=0.95), str(tmp_path),
                     evaluator_lib.EvaluationRecord(global_step=50, **evaluated))
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


def test_two_clones_count_every_example_once():
    # 23 examples in global batches of 10 (5 per clone): the last batch of 3 is padded.
    images, labels = testing_utils.cifar_sized_examples()
    net = testing_utils.built_cifarnet()
    single = evaluator_lib.evaluate(net, tf.data.Dataset.from_tensor_slices(
        (images, labels)).batch(23), top_k=(1, 2, 5))
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
    with strategy.scope():
        mirrored_net = testing_utils.built_cifarnet()
        for mirrored, original in zip(mirrored_net.variables, net.variables):
            mirrored.assign(original)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(10)
    evaluator = evaluator_lib.Evaluator(mirrored_net, num_classes=10, top_k=(1, 2, 5),
                                    strategy=strategy)
    for _ in range(2):  # the same evaluator again (a second checkpoint) counts afresh
        metrics = evaluator.evaluate(dataset, batch_size=10)
        assert metrics['num_examples'] == 23
        np.testing.assert_array_equal(metrics['confusion'], single['confusion'])
        assert np.bincount(labels, minlength=10).tolist() == metrics['confusion'].sum(
            axis=1).tolist()
        for name in ('Accuracy', 'Recall_2', 'Recall_5'):
            assert metrics[name] == single[name]
    assert 0 < single['Accuracy'] < single['Recall_2'] < single['Recall_5'] < 1


def test_input_options_reach_the_distributed_dataset(monkeypatch):
    """--noprefetch_to_device and --per_replica_buffer_size (deployment.device_input)."""
    images, labels = testing_utils.cifar_sized_examples()
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
    with strategy.scope():
        net = testing_utils.built_cifarnet()
    options = tf.distribute.InputOptions(experimental_fetch_to_device=False,
                                         experimental_per_replica_buffer_size=0)
    distribute, calls = strategy.experimental_distribute_dataset, []
    monkeypatch.setattr(strategy, 'experimental_distribute_dataset',
                        lambda dataset, options=None: calls.append(options) or
                        distribute(dataset, options=options))
    evaluator = evaluator_lib.Evaluator(net, num_classes=10, strategy=strategy,
                                    input_options=options)
    metrics = evaluator.evaluate(
        tf.data.Dataset.from_tensor_slices((images, labels)).batch(10), batch_size=10)
    assert calls == [options] and metrics['num_examples'] == 23


def test_unreadable_counts_and_all_masked_batches():
    # The input pipeline's third item counts unreadable examples so far; a batch may be
    # empty when all of its examples were unreadable.
    images, labels = testing_utils.cifar_sized_examples(count=6)
    batches = [(images[:4], labels[:4], 1), (images[:0], labels[:0], 3),
               (images[4:], labels[4:], 3)]
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(batches), output_signature=(
            tf.TensorSpec([None, 32, 32, 3], tf.float32), tf.TensorSpec([None], tf.int64),
            tf.TensorSpec([], tf.int64)))
    metrics = evaluator_lib.evaluate(testing_utils.built_cifarnet(), dataset, batch_size=4)
    assert (metrics['num_examples'], metrics['num_unreadable']) == (6, 3)


def test_report_writes_confusion_csv_per_class_accuracy_and_best(tmp_path):
    confusion = np.array([[3, 1, 0], [0, 0, 0], [1, 0, 1]])
    metrics = {'Accuracy': 4 / 6, 'Recall_2': 5 / 6, 'num_examples': 6,
               'confusion': confusion}
    record = evaluator_lib.EvaluationRecord(checkpoint='/t/model.ckpt-3', global_step=3,
                                        model_name='m', dataset_name='d', split_name='s')
    evaluator_lib.report(metrics, str(tmp_path), record, ['cat', 'dog, big', 'eel'])
    rows = (tmp_path / 'confusion.csv').read_text().splitlines()
    assert rows == ['true \\ predicted,"cat","dog, big","eel"', '"cat",3,1,0',
                    '"dog, big",0,0,0', '"eel",1,0,1']
    latest = json.loads((tmp_path / 'metrics.json').read_text())
    assert latest['per_class_accuracy'] == {'cat': 0.75, 'dog, big': None, 'eel': 0.5}
    assert evaluator_lib.update_best(str(tmp_path), metrics, record)
    worse = dataclasses.replace(record, checkpoint='/t/model.ckpt-4', global_step=4)
    assert not evaluator_lib.update_best(str(tmp_path), dict(metrics, Accuracy=0.5), worse)
    assert not evaluator_lib.update_best(str(tmp_path), metrics, worse)  # a tie keeps the first
    best = json.loads((tmp_path / 'best_checkpoint.json').read_text())
    assert (best['checkpoint'], best['Accuracy']) == ('/t/model.ckpt-3', 4 / 6)


class _FakeTime:
    """A clock that advances only when the watcher sleeps; `on_sleep` acts as training."""

    def __init__(self, on_sleep=lambda now: None):
        self.now, self.on_sleep = 0.0, on_sleep

    def clock(self):
        return self.now

    def sleep(self, secs):
        assert self.now < 1000, 'the watch never ended'
        self.now += secs
        self.on_sleep(self.now)


def _save_fake_checkpoint(train_dir, step, keep=None):
    """A 'checkpoint' state file listing model.ckpt-<step> (a one-variable checkpoint
    written), as CheckpointManager writes; with keep, older ones beyond it are deleted."""
    prefix = str(train_dir / f'model.ckpt-{step}')
    tf.train.Checkpoint(step=tf.Variable(step)).write(prefix)
    listed = sorted((int(p.name[len('model.ckpt-'):-len('.index')]), str(p)[:-6])
                    for p in train_dir.glob('model.ckpt-*.index'))
    if keep is not None:
        for _, old in listed[:-keep]:
            (train_dir / (pathlib.Path(old).name + '.index')).unlink()
        listed = listed[-keep:]
    (train_dir / 'checkpoint').write_text(
        f'model_checkpoint_path: "{prefix}"\n'
        + ''.join(f'all_model_checkpoint_paths: "{p}"\n' for _, p in listed))


def test_watch_times_out_without_new_checkpoints(tmp_path):
    _save_fake_checkpoint(tmp_path, 4)
    fake = _FakeTime()
    config = watch_lib.WatchConfig(interval_secs=2, timeout_secs=7)
    seen = [step for step, _ in watch_lib.watch_checkpoints(
        str(tmp_path), config, clock=fake.clock, sleep=fake.sleep)]
    assert seen == [4] and fake.now == 8  # looked at 0, 2, 4, 6, 8: 8 s >= 7 s of silence
    # A train_dir the training has not created yet is waited for, as an empty one.
    missing = watch_lib.watch_checkpoints(str(tmp_path / 'not_yet'), config,
                                          clock=fake.clock, sleep=fake.sleep)
    assert list(missing) == []


def test_watch_passes_over_checkpoints_deleted_and_evaluated_before(tmp_path):
    for step in (1, 2, 3):
        _save_fake_checkpoint(tmp_path, step)
    fake = _FakeTime()
    seen = []
    for step, path in watch_lib.watch_checkpoints(
            str(tmp_path), watch_lib.WatchConfig(interval_secs=1, backfill=True),
            final_step=lambda: 6, skip=lambda path: path.endswith('-2'),
            clock=fake.clock, sleep=fake.sleep):
        seen.append(step)
        if step == 3:  # training writes 4, 5, 6 keeping 2 while step 3 is evaluated
            for new in (4, 5, 6):
                _save_fake_checkpoint(tmp_path, new, keep=2)
    assert seen == [1, 3, 5, 6]  # 2 evaluated before; 4 deleted before its turn


def test_watch_passes_over_damaged_checkpoints_until_saved_anew(tmp_path, caplog):
    for step in (1, 2, 3):
        _save_fake_checkpoint(tmp_path, step)
    data_file = tmp_path / 'model.ckpt-3.data-00000-of-00001'
    data_file.write_bytes(data_file.read_bytes()[:10])  # truncated

    def training(now):  # resumed from step 2, it saves step 3 again, then 4
        if now == 2:
            _save_fake_checkpoint(tmp_path, 3)
        if now == 4:
            _save_fake_checkpoint(tmp_path, 4)

    fake = _FakeTime(training)
    seen = [step for step, _ in watch_lib.watch_checkpoints(
        str(tmp_path), watch_lib.WatchConfig(interval_secs=1),
        final_step=lambda: 4, clock=fake.clock, sleep=fake.sleep)]
    assert seen == [2, 3, 4]  # from the newest intact; 3 once saved anew
    warnings = [r.getMessage() for r in caplog.records if 'is damaged' in r.getMessage()]
    assert len(warnings) == 1 and 'evaluating' in warnings[0]
    assert 'model.ckpt-3.data-00000-of-00001 is truncated (10 bytes)' in warnings[0]


def test_a_label_outside_the_models_classes_is_one_usage_error():
    from core.errors import UsageError
    images, labels = testing_utils.cifar_sized_examples()
    labels = labels.copy()
    labels[7] = 10  # cifarnet here has classes 0..9
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(5)
    with pytest.raises(UsageError, match=r'outside the model\'s classes 0\.\.9'):
        evaluator_lib.evaluate(testing_utils.built_cifarnet(), dataset)


def test_recall_k_is_reported_only_below_the_class_count():
    """Recall_5 of 3 classes is 1 whatever the model: left out; Accuracy always stays."""
    assert evaluator_lib.Evaluator(None, num_classes=3, top_k=(1, 2, 5)).top_k == (1, 2)
    assert evaluator_lib.Evaluator(None, num_classes=6, top_k=(1, 5)).top_k == (1, 5)
    assert evaluator_lib.Evaluator(None, num_classes=2, top_k=(5,)).top_k == (1,)
