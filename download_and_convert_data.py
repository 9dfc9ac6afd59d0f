"""Downloads a dataset (or generates one) and converts it to TF-Slim-format TFRecords.

Usage:
  python download_and_convert_data.py --dataset_name=shapes --dataset_dir=/tmp/shapes
  python download_and_convert_data.py --dataset_name=mnist --dataset_dir=/tmp/mnist
  python download_and_convert_data.py --dataset_name=cifar10 --dataset_dir=/tmp/cifar10

Re-running skips finished work: existing TFRecords are kept, and verified archives
(see --keep_archives) are not downloaded again.
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from cli import guard  # noqa: E402
from cli import flags as cli_flags  # noqa: E402
from datasets import dataset_factory  # noqa: E402

cli_flags.define_dataset_name_flag(None, "Dataset to convert")
cli_flags.define_tf_log_level_flag()
flags.adopt_module_key_flags(cli_flags)
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
    app.run(guard.guarded(main))
