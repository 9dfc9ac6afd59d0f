"""An evaluation's TensorBoard summaries, at the evaluated checkpoint's step.

  eval/Accuracy, eval/Recall_<k>   scalars
  eval/confusion_matrix            the labelled matrix (training.summaries.confusion_image), for
                                   up to MAX_LABELLED_CLASSES classes
  eval/per_class                   text: a markdown table of each class's examples,
                                   accuracy, precision and most frequent wrong prediction
"""
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from training.summaries.confusion_image import MAX_LABELLED_CLASSES, confusion_image


def _escaped(name: str) -> str:
    return name.replace('|', '\\|')


def per_class_table(confusion: np.ndarray, class_names: Sequence[str]) -> str:
    """Markdown: one row per class, in class order."""
    totals, predicted = confusion.sum(axis=1), confusion.sum(axis=0)
    rows = ['| class | name | examples | accuracy | precision | most often predicted '
            'instead |', '|---:|---|---:|---:|---:|---|']
    for index, name in enumerate(class_names):
        hits = confusion[index, index]
        wrong = confusion[index].copy()
        wrong[index] = 0
        instead = (f'{int(wrong.argmax())} {_escaped(class_names[wrong.argmax()])} '
                   f'({int(wrong.max())})' if wrong.max() else '')
        accuracy = f'{hits / totals[index]:.4f}' if totals[index] else ''
        precision = f'{hits / predicted[index]:.4f}' if predicted[index] else ''
        rows.append(f'| {index} | {_escaped(name)} | {int(totals[index])} | {accuracy} | '
                    f'{precision} | {instead} |')
    return '\n'.join(rows)


def write(eval_dir: str, step: int, scalars: Dict[str, float],
          confusion: Optional[np.ndarray], class_names: Sequence[str]):
    """Writes the summaries above into eval_dir's event file."""
    writer = tf.summary.create_file_writer(eval_dir)
    with writer.as_default(step=step):
        for name, value in scalars.items():
            tf.summary.scalar(f'eval/{name}', value)
        if confusion is not None:
            if len(confusion) <= MAX_LABELLED_CLASSES:
                tf.summary.image('eval/confusion_matrix',
                                 confusion_image(confusion, class_names))
            tf.summary.text('eval/per_class', per_class_table(confusion, class_names))
    writer.close()
