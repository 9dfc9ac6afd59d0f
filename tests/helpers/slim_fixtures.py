"""TF-Slim's world in small, for docs pages that run slim's own scripts: mnist, cifar10
and flowers converted as the converters write them (so a script's download step finds
them converted and skips), and model-zoo checkpoints with slim's variable names and
seeded values. Built once per docs test run; linked into each scratch disk/."""
import gzip
import json
import pathlib

from helpers import testing_utils

NETS_JSON = testing_utils.TEST_DATA / 'slim_reference' / 'nets.json.gz'
DATASETS = ('mnist', 'cifar10', 'flowers')
# file in disk/checkpoints -> (network, TF1's first single-file format?). The 2016
# archives (inception_v3, resnet_v1_50) hold one .ckpt file; mobilenet's hold .index
# and .data files.
CHECKPOINTS = {
    'inception_v3.ckpt': ('inception_v3', True),
    'resnet_v1_50.ckpt': ('resnet_v1_50', True),
    'mobilenet_v1_1.0_224.ckpt': ('mobilenet_v1', False),
}


def _images(count, height, width, channels, seed):
    import numpy as np
    import tensorflow as tf
    from datasets import shapes
    images, labels = shapes.generate(count, seed=seed)
    images = tf.cast(tf.image.resize(images, [height, width]), tf.uint8)
    if channels == 1:
        images = tf.cast(tf.image.rgb_to_grayscale(images), tf.uint8)
    return images.numpy(), np.asarray(labels, np.int64)


def write_datasets(directory):
    """directory/<mnist|cifar10|flowers>/, each as its converter leaves it."""
    from datasets import cifar10, dataset_utils, flowers, mnist
    directory = pathlib.Path(directory)
    for module, size, channels in ((mnist, 28, 1), (cifar10, 32, 3)):
        target = directory / module.__name__.split('.')[-1]
        target.mkdir(parents=True)
        for seed, path in enumerate(module.output_paths(str(target))):
            images, labels = _images(24, size, size, channels, seed)
            dataset_utils.write_tfrecord(path, images, labels)
        dataset_utils.write_label_file(module.INFO.labels_to_names(), str(target))
    target = directory / 'flowers'
    target.mkdir(parents=True)
    for seed, path in enumerate(flowers.output_paths(str(target))):
        images, labels = _images(4, 60, 80, 3, seed)
        dataset_utils.write_tfrecord(path, images, labels % 5)
    dataset_utils.write_label_file(flowers.INFO.labels_to_names(), str(target))


def write_checkpoints(directory):
    """directory/<CHECKPOINTS>: every variable of the net under slim's name."""
    import tensorflow as tf
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with gzip.open(NETS_JSON, 'rt') as f:
        nets = json.load(f)
    for filename, (network, single_file) in CHECKPOINTS.items():
        variables = {name: testing_utils.golden_weight_value(name, shape)
                     for name, shape, _ in nets[network]['training']['variables']
                     if '/' in name}
        prefix = str(directory / filename)
        if single_file:
            names = sorted(variables)
            tf.raw_ops.Save(filename=prefix, tensor_names=names,
                            data=[tf.constant(variables[n]) for n in names])
        else:
            testing_utils.write_tf1_checkpoint(prefix, variables)
    return directory
