import collections

import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils

from datasets import dataset_factory, input_pipeline
from preprocessing import preprocessing_factory


@pytest.fixture(scope='module')
def shapes_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp('shapes')
    written = testing_utils.write_small_shapes(str(directory), num_train=40,
                                               num_validation=37)
    return str(directory), written


def _input_fn(dataset_dir, split, batch_size, is_training, labels_offset=0):
    spec = dataset_factory.get_dataset('shapes', split, dataset_dir)
    preprocess = preprocessing_factory.get_preprocessing('cifarnet', is_training)
    return input_pipeline.make_input_fn(spec, preprocess, input_pipeline.InputConfig(
        batch_size=batch_size, image_size=32, is_training=is_training,
        labels_offset=labels_offset, seed=1))


@pytest.mark.parametrize('batch_size', [1, 10, 37, 100])
def test_evaluation_reads_every_example_exactly_once(shapes_dir, batch_size):
    directory, written = shapes_dir
    dataset = _input_fn(directory, 'validation', batch_size, False)(None)
    labels = np.concatenate([labels.numpy() for _, labels in dataset])
    assert len(labels) == 37
    assert collections.Counter(labels.tolist()) == collections.Counter(
        written['validation'][1].tolist())


def test_training_batches_are_full_preprocessed_and_repeat(shapes_dir):
    directory, _ = shapes_dir
    dataset = _input_fn(directory, 'train', 16, True)(None)
    batches = list(dataset.take(6))  # 96 examples from a 40-example split
    for images, labels in batches:
        assert images.shape == (16, 32, 32, 3) and images.dtype == tf.float32
        assert labels.shape == (16,)
    # cifarnet preprocessing standardises each image.
    assert abs(float(tf.reduce_mean(batches[0][0]))) < 0.2


def test_labels_offset_is_subtracted(shapes_dir):
    directory, written = shapes_dir
    dataset = _input_fn(directory, 'validation', 37, False, labels_offset=1)(None)
    labels = next(iter(dataset))[1].numpy()
    assert sorted(labels.tolist()) == sorted((written['validation'][1] - 1).tolist())


def test_each_input_pipeline_reads_a_disjoint_part(shapes_dir):
    directory, _ = shapes_dir
    input_fn = _input_fn(directory, 'validation', 100, False)
    parts = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2,
                                             input_pipeline_id=pipeline_id)
        parts.append(sum(int(tf.size(labels)) for _, labels in input_fn(context)))
    assert parts == [18, 19]  # one shard each
