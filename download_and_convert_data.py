"""Downloads a dataset (or generates one) and converts it to TF-Slim-format TFRecords.

Usage:
  python download_and_convert_data.py --dataset_name=shapes --dataset_dir=/tmp/shapes
  python download_and_convert_data.py --dataset_name=mnist --dataset_dir=/tmp/mnist
  python download_and_convert_data.py --dataset_name=cifar10 --dataset_dir=/tmp/cifar10
  python download_and_convert_data.py --dataset_name=flowers --dataset_dir=/tmp/flowers
  python download_and_convert_data.py --dataset_name=image_folder \
      --source_dir=~/my_photos --dataset_dir=/tmp/my_photos
  python download_and_convert_data.py --dataset_name=imagenet \
      --source_dir=/data/ilsvrc2012 --bounding_boxes=/data/ILSVRC2012_bbox_train_v2.tar.gz \
      --dataset_dir=/tmp/imagenet
  python download_and_convert_data.py --dataset_name=visualwakewords \
      --source_dir=/data/coco2014 --dataset_dir=/tmp/vww
  python download_and_convert_data.py --dataset_name=tfds:oxford_flowers102 \
      --dataset_dir=~/tensorflow_datasets

Re-running skips finished work: existing TFRecords are kept, and verified archives
(see --keep_archives) are not downloaded again.
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from cli import guard  # noqa: E402
from cli import flags as cli_flags  # noqa: E402
from datasets import dataset_factory  # noqa: E402
from datasets import dataset_utils  # noqa: E402

cli_flags.define_dataset_name_flag(None, "Dataset to convert")
cli_flags.define_tf_log_level_flag()
cli_flags.define_conversion_flags()
flags.adopt_module_key_flags(cli_flags)

FLAGS = flags.FLAGS


def main(argv):
    del argv
    options = dataset_utils.ConvertOptions(
        keep_archives=FLAGS.keep_archives, source_dir=FLAGS.source_dir,
        validation_percentage=FLAGS.validation_percentage,
        train_shards=FLAGS.train_shards, validation_shards=FLAGS.validation_shards,
        bounding_boxes=FLAGS.bounding_boxes,
        small_object_area_threshold=FLAGS.small_object_area_threshold,
        foreground_class_of_interest=FLAGS.foreground_class_of_interest,
        num_workers=FLAGS.num_workers)
    dataset_factory.download_and_convert(FLAGS.dataset_name, FLAGS.dataset_dir,
                                         options=options)


if __name__ == "__main__":
    app.run(guard.guarded(main))
