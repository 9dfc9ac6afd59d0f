"""Exactly one pass over a split: Accuracy and Recall_5, as slim's eval reported them."""
import dataclasses
import datetime
import json
import os
from typing import Dict, Optional

import tensorflow as tf
from absl import logging

from core.progress import ProgressBar


def evaluate(network, dataset: tf.data.Dataset, *, num_examples: Optional[int] = None,
             max_num_batches: Optional[int] = None) -> Dict[str, float]:
    """Counts top-1 and top-5 hits over every example of `dataset`, once each.

    `dataset` yields (images, labels) batches and must not repeat; the last batch may
    be short. Batches may carry a third item, the count of examples the input pipeline
    could not decode so far (reported as num_unreadable). `num_examples` only sizes the
    progress bar.
    """

    @tf.function
    def count_hits(images, labels):
        logits, _ = network(images, training=False)
        k = min(5, logits.shape[-1])
        labels = tf.cast(labels, tf.int32)
        top1 = tf.cast(tf.argmax(logits, axis=-1, output_type=tf.int32) == labels, tf.int64)
        top5 = tf.cast(tf.math.in_top_k(labels, logits, k), tf.int64)
        return tf.reduce_sum(top1), tf.reduce_sum(top5), tf.size(labels, tf.int64)

    correct = in_top5 = seen = unreadable = 0
    progress = ProgressBar('eval', num_examples)
    for batch_index, (images, labels, *skipped) in enumerate(dataset):
        if max_num_batches is not None and batch_index >= max_num_batches:
            break
        if skipped:
            unreadable = int(skipped[0])
        if labels.shape[0] == 0:  # a batch of unreadable examples only
            continue
        top1, top5, size = (int(x) for x in count_hits(images, labels))
        correct, in_top5, seen = correct + top1, in_top5 + top5, seen + size
        progress.update(seen)
    progress.close()
    if seen == 0:
        raise ValueError('The evaluation split yielded no examples.')
    if unreadable:
        print(f'eval/unreadable_examples: {unreadable} (skipped; not in the metrics)')
    return {'Accuracy': correct / seen, 'Recall_5': in_top5 / seen, 'num_examples': seen,
            'num_unreadable': unreadable}


@dataclasses.dataclass(frozen=True)
class EvaluationRecord:
    """What was evaluated, written beside the metrics."""
    checkpoint: str
    global_step: Optional[int]
    model_name: str
    dataset_name: str
    split_name: str


def report(metrics: Dict[str, float], eval_dir: str, record: EvaluationRecord):
    """Prints `eval/<name>: value` lines, writes TensorBoard scalars, and the metrics with
    what was evaluated: appended as one JSON line to metrics.jsonl (every evaluation) and
    written alone to metrics.json (the latest)."""
    tf.io.gfile.makedirs(eval_dir)
    for name in ('Accuracy', 'Recall_5'):
        print(f'eval/{name}: {metrics[name]:.4f}')
    entry = dict(metrics, **dataclasses.asdict(record),
                 time=datetime.datetime.now(datetime.timezone.utc).isoformat(
                     timespec='seconds'))
    path = os.path.join(eval_dir, 'metrics.json')
    with tf.io.gfile.GFile(path + '.tmp', 'w') as f:
        json.dump(entry, f, indent=2)
    tf.io.gfile.rename(path + '.tmp', path, overwrite=True)
    with open(os.path.join(eval_dir, 'metrics.jsonl'), 'a', encoding='utf-8') as f:
        f.write(json.dumps(entry) + '\n')
    writer = tf.summary.create_file_writer(eval_dir)
    with writer.as_default(step=record.global_step or 0):
        for name in ('Accuracy', 'Recall_5'):
            tf.summary.scalar(f'eval/{name}', metrics[name])
    writer.close()
    logging.info('Wrote %s.', path)
