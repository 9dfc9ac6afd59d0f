"""The tf.data pipeline from a DatasetSpec to batches of preprocessed images.

list shards -> per-worker shard -> parallel interleave -> shuffle -> parse + decode
-> preprocess -> batch -> prefetch. `make_input_fn` returns a function of a
`tf.distribute.InputContext`, for `strategy.distribute_datasets_from_function`.
"""
import dataclasses
from typing import Callable, Optional

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class InputConfig:
    batch_size: int                  # per replica, like slim's per-clone --batch_size
    image_size: int
    is_training: bool
    labels_offset: int = 0          # slim's --labels_offset, subtracted from labels
    num_readers: int = 4
    num_preprocessing_threads: int = 4
    shuffle_buffer_size: int = 2048
    seed: Optional[int] = None


def make_input_fn(spec, preprocess_fn: Callable, config: InputConfig):
    files = spec.list_files()  # raises a UsageError now, not inside tf.data later

    def parse_and_preprocess(serialized):
        image, label = spec.decode(serialized)
        image = preprocess_fn(image, config.image_size, config.image_size)
        return image, tf.cast(label, tf.int64) - config.labels_offset

    def input_fn(input_context: Optional[tf.distribute.InputContext] = None):
        num_pipelines = input_context.num_input_pipelines if input_context else 1
        pipeline_id = input_context.input_pipeline_id if input_context else 0
        dataset = tf.data.Dataset.from_tensor_slices(files)
        shard_records = len(files) < num_pipelines
        if num_pipelines > 1 and not shard_records:
            dataset = dataset.shard(num_pipelines, pipeline_id)
        if config.is_training:
            dataset = dataset.shuffle(len(files), seed=config.seed).repeat()
        dataset = dataset.interleave(
            tf.data.TFRecordDataset, cycle_length=config.num_readers,
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=not config.is_training)
        if num_pipelines > 1 and shard_records:
            dataset = dataset.shard(num_pipelines, pipeline_id)
        if config.is_training:
            dataset = dataset.shuffle(config.shuffle_buffer_size, seed=config.seed)
        dataset = dataset.map(parse_and_preprocess,
                              num_parallel_calls=config.num_preprocessing_threads,
                              deterministic=not config.is_training)
        # Training keeps batches full (static shapes, equal clones); evaluation keeps
        # every example, so its last batch may be short.
        dataset = dataset.batch(config.batch_size, drop_remainder=config.is_training)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return input_fn
