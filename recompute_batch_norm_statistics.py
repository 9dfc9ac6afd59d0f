r"""Recomputes a checkpoint's batch-norm statistics, for evaluation, export and
prediction: a copy whose moving means and variances are the exact average of each
layer's batch moments over N batches of the training split.

  python recompute_batch_norm_statistics.py --dataset_name=image_folder \
      --dataset_dir=/tmp/my_data --model_name=mobilenet_v1 \
      --checkpoint_path=/tmp/my_model --recompute_batch_norm_statistics=50

The batches are preprocessed as for training (--dataset_split_name, default train,
--batch_size, default 32, at --image_size). The copy, <batch_norm_statistics_dir>/
model.ckpt-<step> (default: batch_norm_statistics/ beside the checkpoint), is passed to
eval_image_classifier.py and export_inference_graph.py as --checkpoint_path; the source
checkpoint is never changed. Evaluation and export take the same flag to do this first.
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from cli import batch_norm_job, configs, guard  # noqa: E402
from cli import flags as cli_flags  # noqa: E402

FLAG_GROUPS = ('Model', 'Dataset', 'Split', 'Input pipeline', 'Image size', 'Weights',
               'Batch-norm statistics', 'Devices', 'Logging')
cli_flags.define(FLAG_GROUPS, usage=__doc__)


def main(argv):
    del argv
    return batch_norm_job.run(configs.recompute_from_flags())


if __name__ == '__main__':
    guard.run(main)
