r"""Evaluates a trained classifier on one split of a dataset and prints its accuracy.

  python eval_image_classifier.py --dataset_name=shapes --dataset_dir=/tmp/shapes \
      --dataset_split_name=validation --model_name=cifarnet \
      --checkpoint_path=/tmp/train --eval_dir=/tmp/eval

It prints eval/Accuracy and, with more than 5 classes, eval/Recall_5 (--top_k: any
top-k recall, for k below the class count). With --eval_interval_secs=N it follows the
training in --checkpoint_path, evaluating each new checkpoint once until the training's
last one. --eval_dir receives metrics.json(l), confusion.csv, best_checkpoint.json and
TensorBoard events.
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from cli import benchmark_job, configs, eval_job, guard  # noqa: E402
from cli import flags as cli_flags  # noqa: E402

FLAG_GROUPS = ('Model', 'Dataset', 'Split', 'Input pipeline', 'Weights', 'Quantization',
               'Evaluation', 'Batch-norm statistics', 'Continuous evaluation', 'Devices',
               'Device performance', 'Logging', 'Benchmark')
cli_flags.define(FLAG_GROUPS, usage=__doc__)


def main(argv):
    del argv
    job, benchmark = configs.evaluation_from_flags(), configs.benchmark_from_flags()
    return benchmark_job.time_evaluation(job, benchmark) if benchmark else eval_job.run(job)


if __name__ == '__main__':
    guard.run(main)
