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

from cli import configs, guard  # noqa: E402
from cli import flags as cli_flags  # noqa: E402
from datasets import dataset_factory  # noqa: E402

FLAG_GROUPS = ('Dataset', 'Conversion', 'Existing output', 'Logging')
cli_flags.define(FLAG_GROUPS, usage=__doc__)


def main(argv):
    del argv
    conversion = configs.conversion_from_flags()
    dataset_factory.download_and_convert(conversion.dataset_name, conversion.dataset_dir,
                                         options=conversion.options)


if __name__ == '__main__':
    guard.run(main)
