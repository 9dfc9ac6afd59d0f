"""Evaluation: exact passes over a split, once or for every new checkpoint of a training.

One pass counts, over every example exactly once, slim's Accuracy and Recall_5, any
other top-k recall (for k below the class count: above it every example is a hit), and
a confusion matrix (from which per-class accuracy). Under a
strategy with several replicas (eval's --num_clones) each batch is padded to the full
global batch and split evenly; padded examples are masked out of every count, so the
numbers equal a one-device pass.

Continuous evaluation follows a training with training.checkpoints.watch.
"""
import dataclasses
import datetime
import json
import os
import re
from typing import Callable, Dict, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from core.errors import UsageError
from core.progress import ProgressBar
from training.summaries import eval_summaries

DEFAULT_TOP_K = (1, 5)
# Batches counted per call of the compiled counting loop: fewer host round trips.
BATCHES_PER_CALL = 16
BEST_CHECKPOINT_FILE = 'best_checkpoint.json'
BEST_CHECKPOINT_DIR = 'best'  # continuous evaluation keeps a copy of the best here
CONFUSION_FILE = 'confusion.csv'
METRICS_HISTORY_FILE = 'metrics.jsonl'


def recall_name(k: int) -> str:
    """The metric name of top-k recall: slim's 'Accuracy' for k=1, 'Recall_<k>' else."""
    return 'Accuracy' if k == 1 else f'Recall_{k}'


class Evaluator:
    """Counts one network's hits over exact passes of a split, checkpoint after checkpoint.

    The counting step is traced once, on the first pass, and reused for every later
    pass (restoring other weights into the same variables does not retrace). Create the
    network under `strategy.scope()`. input_options (deployment.device_input) go to the
    strategy's experimental_distribute_dataset.
    """

    def __init__(self, network, *, num_classes: int, top_k: Sequence[int] = DEFAULT_TOP_K,
                 strategy: Optional[tf.distribute.Strategy] = None,
                 input_options: Optional[tf.distribute.InputOptions] = None):
        if not top_k or any(k < 1 for k in top_k):
            raise UsageError(f'--top_k={",".join(map(str, top_k))}; pass positive k values '
                             'such as 1,5.')
        self.network = network
        self.num_classes = num_classes
        # Recall_k with k >= the class count is 1 whatever the model (Recall_5 of 3
        # classes): not reported. Accuracy (k=1) always is.
        left_out = sorted(k for k in set(top_k) if k >= max(num_classes, 2))
        self.top_k = tuple(sorted({1, *top_k} - set(left_out)))
        if left_out:
            logging.info('Not reported with %d classes (always 1): %s.', num_classes,
                         ', '.join(map(recall_name, left_out)))
        self.strategy = strategy or tf.distribute.get_strategy()
        self.input_options = input_options
        self._count = tf.function(self._count_batches, autograph=False)

    def _replica_counts(self, images, labels, mask, skipped):
        logits, _ = self.network(images, training=False)
        logits = tf.cast(logits, tf.float32)  # low-precision nets: rank in float32
        labels = tf.cast(labels, tf.int32)
        weights = tf.cast(mask, tf.int64)
        predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
        confusion = tf.math.confusion_matrix(labels, predictions, self.num_classes,
                                             weights=weights, dtype=tf.int64)
        hits = tf.stack([
            tf.reduce_sum(tf.cast(tf.math.in_top_k(labels, logits, k), tf.int64) * weights)
            for k in self.top_k])
        return confusion, hits, tf.reduce_max(skipped)

    def _count_batch(self, batch):
        counts = self.strategy.run(self._replica_counts, args=batch)
        total = tf.distribute.ReduceOp.SUM
        confusion, hits, skipped = counts
        return (self.strategy.reduce(total, confusion, axis=None),
                self.strategy.reduce(total, hits, axis=None),
                tf.cast(tf.reduce_max(tf.stack(
                    self.strategy.experimental_local_results(skipped))), tf.int64))

    def _count_batches(self, iterator, max_batches):
        """Counts up to max_batches batches in one call; returns the summed counts and
        how many batches there were (fewer at the end of the split).

        Two batches per iteration: their forward passes are independent, so TensorFlow
        runs them side by side, keeping both cores busy where one batch's ops alone
        leave gaps. Counts are integers: the sums equal a batch-by-batch pass."""
        confusion = tf.zeros([self.num_classes] * 2, tf.int64)
        hits = tf.zeros([len(self.top_k)], tf.int64)
        zero = tf.constant(0, tf.int64)
        nothing = (tf.zeros_like(confusion), tf.zeros_like(hits), zero)

        def counts_of(batch):
            return tf.cond(batch.has_value(),
                           lambda: self._count_batch(batch.get_value()),
                           lambda: nothing)

        def body(batches, confusion, hits, skipped, more):
            first = iterator.get_next_as_optional()
            # Never read past max_batches: the caller's iterator goes on from there.
            second_wanted = batches + 2 <= max_batches
            second = tf.cond(second_wanted, iterator.get_next_as_optional,
                             lambda: tf.experimental.Optional.empty(first.element_spec))
            (confusion_1, hits_1, skipped_1), (confusion_2, hits_2, skipped_2) = (
                counts_of(first), counts_of(second))
            read = (tf.cast(first.has_value(), tf.int64)
                    + tf.cast(second.has_value(), tf.int64))
            more = tf.logical_and(first.has_value(), tf.logical_or(
                second.has_value(), tf.logical_not(second_wanted)))
            return (batches + read, confusion + confusion_1 + confusion_2,
                    hits + hits_1 + hits_2,
                    tf.maximum(skipped, tf.maximum(skipped_1, skipped_2)), more)

        batches, confusion, hits, skipped, _ = tf.while_loop(
            lambda batches, *state: tf.logical_and(state[-1], batches < max_batches),
            body, (zero, confusion, hits, zero, tf.constant(True)))
        return batches, confusion, hits, skipped

    def global_batch(self, batch_size: int) -> int:
        """Examples per counted batch: batch_size rounded up to a multiple of the
        replicas (short batches are padded to it)."""
        replicas = self.strategy.num_replicas_in_sync
        return max(replicas, -(-batch_size // replicas) * replicas)

    def batches(self, dataset: tf.data.Dataset, batch_size: Optional[int] = None):
        """An iterator of dataset's batches as the counting loop reads them: padded to
        global_batch(batch_size) (default: the first batch's size), split over the
        replicas."""
        if batch_size is None:
            batch_size = int(tf.shape(next(iter(dataset))[1])[0])
        return iter(self.strategy.experimental_distribute_dataset(
            _padded(dataset, self.global_batch(batch_size)), options=self.input_options))

    def count_only(self, iterator, num_batches: int) -> int:
        """Counts num_batches batches of `iterator` (from batches()) in calls of the
        compiled loop, as evaluate() does, and drops the counts: what --benchmark
        times. Returns the batches read (fewer if the data ended)."""
        counted = 0
        while counted < num_batches:
            wanted = min(BATCHES_PER_CALL, num_batches - counted)
            batches = int(self._count(iterator, tf.constant(wanted, tf.int64))[0])
            counted += batches
            if batches < wanted:
                break
        return counted

    def evaluate(self, dataset: tf.data.Dataset, *, batch_size: Optional[int] = None,
                 num_examples: Optional[int] = None,
                 max_num_batches: Optional[int] = None) -> Dict:
        """One exact pass over `dataset`: (images, labels[, skipped]) batches, no repeat.

        batch_size: the largest batch the dataset yields (default: its first batch's
        size); every batch is padded to it, rounded up to a multiple of the replicas.
        The optional third item counts examples the input pipeline could not decode so
        far (reported as num_unreadable). `num_examples` only sizes the progress bar.
        """
        iterator = self.batches(dataset, batch_size)
        confusion = np.zeros([self.num_classes] * 2, np.int64)
        hits = np.zeros(len(self.top_k), np.int64)
        unreadable = 0
        progress = ProgressBar('eval', num_examples)
        counted = 0
        while max_num_batches is None or counted < max_num_batches:
            wanted = BATCHES_PER_CALL if max_num_batches is None else min(
                BATCHES_PER_CALL, max_num_batches - counted)
            try:
                batches, call_confusion, call_hits, skipped = self._count(
                    iterator, tf.constant(wanted, tf.int64))
            except tf.errors.InvalidArgumentError as error:
                # The confusion matrix's own checks; the input pipeline's data errors
                # (which name the file) pass through to the script's guard.
                if not re.search(r'`labels` (out of bound|contains negative)', str(error)):
                    raise
                raise UsageError(f'A label is outside the model\'s classes 0..'
                                 f'{self.num_classes - 1}; check --labels_offset and that '
                                 '--dataset_name matches the checkpoint.') from None
            confusion += call_confusion.numpy()
            hits += call_hits.numpy()
            unreadable = max(unreadable, int(skipped))
            progress.update(int(confusion.sum()))
            counted += int(batches)
            if int(batches) < wanted:  # the split ended
                break
        progress.close()
        seen = int(confusion.sum())
        if seen == 0:
            raise ValueError('The evaluation split yielded no examples.')
        if unreadable:
            print(f'eval/unreadable_examples: {unreadable} (skipped; not in the metrics)')
        metrics = {recall_name(k): int(h) / seen for k, h in zip(self.top_k, hits)}
        metrics['Accuracy'] = float(np.trace(confusion)) / seen
        metrics.update(num_examples=seen, num_unreadable=unreadable)
        metrics['confusion'] = confusion
        return metrics


def _padded(dataset: tf.data.Dataset, global_batch: int) -> tf.data.Dataset:
    """(images, labels, mask, skipped) batches of exactly global_batch examples: short
    batches padded with zeros that the mask leaves out; skipped per example, so the
    strategy can split it with the batch."""
    def pad(images, labels, *skipped):
        size = tf.shape(labels)[0]
        missing = global_batch - size
        tf.debugging.assert_non_negative(
            missing, 'A batch is larger than the batch_size given to the evaluator.')
        images = tf.pad(images, [[0, missing]] + [[0, 0]] * (len(images.shape) - 1))
        labels = tf.pad(labels, [[0, missing]])
        mask = tf.range(global_batch) < size
        count = tf.cast(skipped[0], tf.int64) if skipped else tf.constant(0, tf.int64)
        return (tf.ensure_shape(images, [global_batch, *images.shape[1:]]),
                tf.ensure_shape(labels, [global_batch]), mask,
                tf.fill([global_batch], count))

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return dataset.map(pad).with_options(options)


def evaluate(network, dataset: tf.data.Dataset, *, num_examples: Optional[int] = None,
             max_num_batches: Optional[int] = None, top_k: Sequence[int] = DEFAULT_TOP_K,
             strategy: Optional[tf.distribute.Strategy] = None,
             batch_size: Optional[int] = None) -> Dict:
    """One exact pass with a new Evaluator (see Evaluator.evaluate); for a single pass.
    The number of classes is the network's."""
    evaluator = Evaluator(network, num_classes=network.num_classes, top_k=top_k,
                          strategy=strategy)
    return evaluator.evaluate(dataset, batch_size=batch_size, num_examples=num_examples,
                              max_num_batches=max_num_batches)


def per_class_accuracy(confusion: np.ndarray,
                       class_names: Sequence[str]) -> Dict[str, Optional[float]]:
    """{class name: fraction of its examples predicted right}; None if it had none."""
    totals = confusion.sum(axis=1)
    return {name: (float(confusion[i, i] / totals[i]) if totals[i] else None)
            for i, name in enumerate(class_names)}


@dataclasses.dataclass(frozen=True)
class EvaluationRecord:
    """What was evaluated, written beside the metrics."""
    checkpoint: str
    global_step: Optional[int]
    model_name: str
    dataset_name: str
    split_name: str


def _write_atomically(path: str, text: str):
    with tf.io.gfile.GFile(path + '.tmp', 'w') as f:
        f.write(text)
    tf.io.gfile.rename(path + '.tmp', path, overwrite=True)


def _confusion_csv(confusion: np.ndarray, class_names: Sequence[str]) -> str:
    """Rows: true class; columns: predicted class; a header row and column of names."""
    quoted = ['"' + name.replace('"', '""') + '"' for name in class_names]
    lines = ['true \\ predicted,' + ','.join(quoted)]
    lines += [f'{quoted[i]},' + ','.join(str(int(c)) for c in row)
              for i, row in enumerate(confusion)]
    return '\n'.join(lines) + '\n'


def report(metrics: Dict, eval_dir: str, record: EvaluationRecord,
           class_names: Optional[Sequence[str]] = None):
    """Prints `eval/<name>: value` lines, writes TensorBoard summaries
    (training.summaries.eval_summaries), and the metrics with what was evaluated: appended as one
    JSON line to metrics.jsonl (every evaluation) and written alone to metrics.json (the
    latest). A 'confusion' matrix in metrics goes to confusion.csv (the latest) and
    becomes per_class_accuracy in the JSON."""
    tf.io.gfile.makedirs(eval_dir)
    metrics = dict(metrics)
    confusion = metrics.pop('confusion', None)
    recalls = ['Accuracy'] + sorted(
        (name for name in metrics if name.startswith('Recall_')),
        key=lambda name: int(name.split('_')[1]))
    for name in recalls:
        print(f'eval/{name}: {metrics[name]:.4f}')
    if confusion is not None:
        class_names = list(class_names or map(str, range(len(confusion))))
        metrics['per_class_accuracy'] = per_class_accuracy(confusion, class_names)
        _write_atomically(os.path.join(eval_dir, CONFUSION_FILE),
                          _confusion_csv(confusion, class_names))
    entry = dict(metrics, **dataclasses.asdict(record),
                 time=datetime.datetime.now(datetime.timezone.utc).isoformat(
                     timespec='seconds'))
    path = os.path.join(eval_dir, 'metrics.json')
    _write_atomically(path, json.dumps(entry, indent=2))
    with open(os.path.join(eval_dir, METRICS_HISTORY_FILE), 'a', encoding='utf-8') as f:
        f.write(json.dumps(entry) + '\n')
    eval_summaries.write(eval_dir, record.global_step or 0,
                         {name: metrics[name] for name in recalls}, confusion, class_names)
    logging.info('Wrote %s.', path)


def _copy_checkpoint(prefix: str, directory: str) -> Optional[str]:
    """Copies a checkpoint's files into `directory`, replacing what it held; returns the
    copy's prefix, or None if the checkpoint disappeared meanwhile."""
    staging = directory + '.tmp'
    if tf.io.gfile.exists(staging):
        tf.io.gfile.rmtree(staging)
    tf.io.gfile.makedirs(staging)
    try:
        for path in tf.io.gfile.glob(prefix + '.*'):  # .index and .data-*
            tf.io.gfile.copy(path, os.path.join(staging, os.path.basename(path)))
    except tf.errors.NotFoundError:
        logging.warning('%s was deleted while it was copied; the best checkpoint is '
                        'recorded but not kept.', prefix)
        tf.io.gfile.rmtree(staging)
        return None
    if tf.io.gfile.exists(directory):
        tf.io.gfile.rmtree(directory)
    tf.io.gfile.rename(staging, directory)
    return os.path.join(directory, os.path.basename(prefix))


def update_best(eval_dir: str, metrics: Dict, record: EvaluationRecord,
                metric: str = 'Accuracy', keep_copy: bool = False) -> bool:
    """Records `record` in best_checkpoint.json if its metric beats the recorded best (the
    earlier checkpoint wins a tie); returns whether it did. With keep_copy the
    checkpoint's files are also copied to <eval_dir>/best/, so the best survives the
    training's --max_checkpoints_to_keep (its prefix is recorded as 'copy')."""
    path = os.path.join(eval_dir, BEST_CHECKPOINT_FILE)
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            best = json.load(f)
        if best.get('metric') == metric and best.get('value', -1) >= metrics[metric]:
            return False
    entry = dict(dataclasses.asdict(record), metric=metric, value=metrics[metric],
                 **{k: v for k, v in metrics.items() if k.startswith(('Accuracy', 'Recall_'))})
    tf.io.gfile.makedirs(eval_dir)
    if keep_copy:
        entry['copy'] = _copy_checkpoint(record.checkpoint,
                                         os.path.join(eval_dir, BEST_CHECKPOINT_DIR))
    _write_atomically(path, json.dumps(entry, indent=2))
    logging.info('Best so far: %s (%s %.4f).', record.checkpoint, metric, metrics[metric])
    return True


def evaluated_checkpoints(eval_dir: str, record_filter: Callable[[Dict], bool]) -> set:
    """Checkpoint paths that metrics.jsonl in eval_dir records, among entries passing
    record_filter (e.g. the same dataset and split)."""
    path = os.path.join(eval_dir, METRICS_HISTORY_FILE)
    if not tf.io.gfile.exists(path):
        return set()
    done = set()
    with tf.io.gfile.GFile(path) as f:
        for line in f:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a crash
                continue
            if record_filter(entry):
                done.add(entry.get('checkpoint'))
    return done
