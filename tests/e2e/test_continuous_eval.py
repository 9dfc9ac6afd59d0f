"""Continuous evaluation through cli.eval_job.evaluate: checkpoints written by this test (a
tiny net, fresh weights each time) while the evaluation watches the train_dir."""
import json
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from helpers import testing_utils
from cli import eval_job, run_record
from cli.assembly import DataConfig
from datasets import shapes
from nets import nets_factory
from training.checkpoints import watch as watch_lib
from training.checkpoints import restore
from training.evaluation import evaluator

WAIT_SECS = 120  # every wait is bounded by this; a passing run takes a few seconds


def _write_checkpoint(manager, network, global_step, step, seed):
    rng = np.random.default_rng(seed)
    for variable in network.variables:
        variable.assign(rng.normal(0, 0.3, variable.shape).astype(np.float32))
    global_step.assign(step)
    manager.save(checkpoint_number=step)


def _evaluated_steps(eval_dir):
    path = eval_dir / evaluator.METRICS_HISTORY_FILE
    if not path.exists():
        return []
    return [json.loads(line)['global_step'] for line in path.read_text().splitlines()]


def _wait_for(condition, what):
    deadline = time.monotonic() + WAIT_SECS
    while not condition():
        assert time.monotonic() < deadline, f'timed out waiting for {what}'
        time.sleep(0.05)


def test_watch_evaluates_each_new_checkpoint_once_in_order_and_stops_at_the_last(tmp_path):
    dataset_dir, train_dir, eval_dir = tmp_path / 'data', tmp_path / 'train', tmp_path / 'eval'
    testing_utils.write_small_shapes(str(dataset_dir), num_train=4, num_validation=37)
    network = nets_factory.get_network_fn('lenet', 10, is_training=True)
    network.build((28, 28, 3))
    global_step = tf.Variable(0, dtype=tf.int64)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(**{restore.MODEL_KEY: network}, global_step=global_step),
        str(train_dir), max_to_keep=10, checkpoint_name='model.ckpt')
    # The training's record says it ends at step 30.
    train_dir.mkdir()
    (train_dir / run_record.RUN_INFO_FILE).write_text(json.dumps({'max_number_of_steps': 30}))
    _write_checkpoint(manager, network, global_step, 5, seed=5)
    _write_checkpoint(manager, network, global_step, 10, seed=10)
    data = DataConfig(dataset_name='shapes', dataset_split_name='validation',
                           dataset_dir=str(dataset_dir), model_name='lenet', batch_size=16)
    outcome = {}

    def watch(backfill):
        outcome['metrics'] = eval_job.evaluate(
            data, str(train_dir), str(eval_dir), top_k=(1, 3),
            watch=watch_lib.WatchConfig(interval_secs=0.05, backfill=backfill))

    # No timeout: only the final checkpoint can end the watch.
    watcher = threading.Thread(target=watch, args=(False,), daemon=True)
    watcher.start()
    _wait_for(lambda: _evaluated_steps(eval_dir) == [10], 'the newest checkpoint')
    # Two at once: both evaluated, in step order.
    _write_checkpoint(manager, network, global_step, 20, seed=20)
    _write_checkpoint(manager, network, global_step, 30, seed=30)
    watcher.join(WAIT_SECS)
    assert not watcher.is_alive(), 'the watch did not stop after the final checkpoint'
    assert _evaluated_steps(eval_dir) == [10, 20, 30]  # 5 predates the watch

    history = [json.loads(line) for line in
               (eval_dir / evaluator.METRICS_HISTORY_FILE).read_text().splitlines()]
    assert all(entry['num_examples'] == 37 for entry in history)
    assert all(entry['Recall_3'] >= entry['Accuracy'] for entry in history)
    best = max(history, key=lambda entry: entry['Accuracy'])  # first of a tie, as recorded
    recorded = json.loads((eval_dir / evaluator.BEST_CHECKPOINT_FILE).read_text())
    assert (recorded['global_step'], recorded['Accuracy']) == (best['global_step'],
                                                              best['Accuracy'])
    # A copy of the best survives the training's deletions, and evaluates the same.
    assert recorded['copy'] == str(eval_dir / 'best' / f'model.ckpt-{best["global_step"]}')
    assert sorted(p.name for p in (eval_dir / 'best').iterdir()) == [
        f'model.ckpt-{best["global_step"]}.data-00000-of-00001',
        f'model.ckpt-{best["global_step"]}.index']
    latest = history[-1]
    confusion = np.loadtxt(eval_dir / evaluator.CONFUSION_FILE, delimiter=',', skiprows=1,
                           usecols=range(1, 11), dtype=np.int64)
    assert confusion.sum() == 37 and np.trace(confusion) == round(latest['Accuracy'] * 37)
    assert list(latest['per_class_accuracy']) == list(shapes.INFO.class_names)

    # A second watch with --backfill evaluates only what was never evaluated: step 5.
    watch(backfill=True)
    assert _evaluated_steps(eval_dir) == [10, 20, 30, 5]
    again = eval_job.evaluate(data, recorded['copy'], str(tmp_path / 'eval_copy'))
    assert again['Accuracy'] == best['Accuracy']


def test_watch_refuses_a_checkpoint_prefix(tmp_path):
    data = DataConfig(dataset_name='shapes', dataset_split_name='validation',
                           dataset_dir=str(tmp_path), model_name='lenet', batch_size=4)
    (tmp_path / 'model.ckpt-5.index').write_bytes(b'')
    with pytest.raises(evaluator.UsageError, match='--eval_interval_secs'):
        eval_job.evaluate(data, str(tmp_path / 'model.ckpt-5'), str(tmp_path / 'eval'),
                      watch=watch_lib.WatchConfig(interval_secs=1))


def test_watch_may_start_before_the_training_makes_its_directory(tmp_path):
    testing_utils.write_small_shapes(str(tmp_path / 'data'), num_train=4, num_validation=3)
    data = DataConfig(dataset_name='shapes', dataset_split_name='validation',
                           dataset_dir=str(tmp_path / 'data'), model_name='lenet',
                           batch_size=4)
    metrics = eval_job.evaluate(data, str(tmp_path / 'train_not_yet'), str(tmp_path / 'eval'),
                            watch=watch_lib.WatchConfig(interval_secs=0.05,
                                                        timeout_secs=0.2))
    assert metrics == {}  # it waited, saw nothing, and timed out
