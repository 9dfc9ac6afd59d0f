"""Downloads a dataset (or generates one) and converts it to TF-Slim-format TFRecords.

Usage:
  python download_and_convert_data.py --dataset_name=shapes --dataset_dir=/tmp/shapes
  python download_and_convert_data.py --dataset_name=mnist --dataset_dir=/tmp/mnist
  python download_and_convert_data.py --dataset_name=cifar10 --dataset_dir=/tmp/cifar10

Re-running skips finished work: existing TFRecords are kept, and verified archives
(see --keep_archives) are not downloaded again.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # Before TensorFlow is imported.

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from datasets import dataset_factory  # noqa: E402
from deployment import common_flags  # noqa: E402

common_flags.define_dataset_name_flag(None, "Dataset to convert")
flags.DEFINE_string("dataset_dir", None,
                    "Directory the TFRecords and labels.txt are written to (created if "
                    "missing); downloads are stored there too.")
flags.DEFINE_bool("keep_archives", False,
                  "Keep the downloaded archives after conversion (TF-Slim deleted them). "
                  "Kept archives are verified and reused, not downloaded again, when the "
                  "conversion is re-run. Ignored for shapes, which downloads nothing.")

FLAGS = flags.FLAGS


def main(argv):
    del argv
    dataset_factory.download_and_convert(FLAGS.dataset_name, FLAGS.dataset_dir,
                                         keep_archives=FLAGS.keep_archives)


if __name__ == "__main__":
    app.run(common_flags.guarded(main))
