r"""Classifies images with an exported SavedModel, printing each image's class.

  python predict_image_classifier.py --saved_model_dir=/tmp/export/saved_model \
      --image_files=new_photos/
  python predict_image_classifier.py --saved_model_dir=/tmp/export \
      --image_files='holiday/*.jpg',cat.jpg,dog.png
  python predict_image_classifier.py --saved_model_dir=/tmp/export \
      --dataset_name=shapes --dataset_dir=/tmp/shapes --dataset_split_name=validation \
      --num_examples=8

--image_files takes files, folders (every file inside, sub-folders included, sorted)
and glob patterns (quoted; the script expands them). An image file that is missing,
empty, truncated or not an image is skipped with one WARNING line naming it, and the
others are predicted: the exit status is 0 when at least one file was predicted, 1 (one
ERROR line) when none could be. Without --image_files, --num_examples examples of a
converted dataset are predicted against their labels.
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from cli import configs, guard, predict_job  # noqa: E402
from cli import flags as cli_flags  # noqa: E402

FLAG_GROUPS = ('SavedModel', 'Prediction', 'Model', 'Dataset', 'Split', 'Logging')
cli_flags.define(FLAG_GROUPS, usage=__doc__)


def main(argv):
    del argv
    return predict_job.run(configs.prediction_from_flags())


if __name__ == '__main__':
    guard.run(main)
