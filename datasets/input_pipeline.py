"""The tf.data pipeline from a DatasetSpec to batches of preprocessed images.

list shards -> per-worker shard -> parallel interleave of shards -> (cache) -> shuffle
-> number each example -> parallel parse + decode + preprocess -> drop unreadable
examples, counting them -> batch -> prefetch. `make_input_fn` returns a function of a
`tf.distribute.InputContext`, for `strategy.distribute_datasets_from_function`.

Robust reading: a record that does not parse or whose image does not decode is
dropped, and counted; a shard whose bytes are corrupt (CRC mismatch) or truncated
ends at the damage instead of ending the run. With `report_skipped`, batches are
(images, labels, skipped), skipped being how many examples this pipeline has dropped
so far.

Reproducible augmentation: training preprocessing draws every random choice from
stateless ops keyed by the example's seed, the run's --seed folded with the example's
number in this pipeline's stream (preprocessing.random_draws). The number is part of
the iterator's checkpointed state, so a resumed run augments as the uninterrupted one.

With InputConfig.data_service, the whole pipeline up to the batches runs on the tf.data
service's data workers (datasets.data_service): no per-worker shard (the dispatcher
hands out the files, in order, one pass; each training worker repeats it), examples
keyed with a random salt as well (each data worker numbers its own from 0), and the
input position is not checkpointable.
"""
import dataclasses
import functools
import random
import re
from typing import Callable, Optional

import tensorflow as tf

from core.errors import DataError
from datasets import data_service as data_service_lib

AUTOTUNE = tf.data.AUTOTUNE
# Records decoded as one group by one parallel call: errors are caught per group (a
# nested dataset per record would cost ~25 % of the decode rate, measured).
_GROUP_SIZE = 16
# Training stops if most examples are unreadable rather than looping forever.
_MIN_SKIPPED_TO_FAIL = 100
# Errors that stop a job carry their one-line message between these marks (see
# data_error_message); tf.debugging.Assert prints each datum in brackets.
_MARK = '@@data-error@@'
_MARKED = re.compile(r'\[' + _MARK + r'\] \[(.*?)\] \[' + _MARK + r'\]', re.DOTALL)


def _stop_unless(condition, template, inputs):
    """Asserts condition inside tf.data; the message (naming file and fix) is
    tf.strings.format(template, inputs), formatted only when the check fails: per example
    the formatting cost more than the check."""
    def fail():
        message = tf.strings.format(template, inputs)
        with tf.control_dependencies([tf.debugging.Assert(False, [_MARK, message, _MARK])]):
            return tf.no_op()
    return tf.cond(condition, tf.no_op, fail)


def data_error_message(error: Exception) -> Optional[str]:
    """The one-line message of a data error the pipeline raised, or None for others."""
    match = _MARKED.search(str(getattr(error, 'message', error)))
    return match.group(1).replace('\\"', '"') if match else None


@dataclasses.dataclass(frozen=True)
class InputConfig:
    batch_size: int                  # per replica, like slim's per-clone --batch_size
    image_size: int
    is_training: bool
    labels_offset: int = 0          # slim's --labels_offset, subtracted from labels
    num_readers: Optional[int] = None               # shards read at once; None: AUTOTUNE
    num_preprocessing_threads: Optional[int] = None  # None: AUTOTUNE
    shuffle_buffer_size: int = 2048
    seed: Optional[int] = None
    deterministic: bool = False     # training order reproducible (slower); eval always is
    cache: bool = False             # keep the split's records in memory after one pass
    report_skipped: bool = False    # batches carry the count of dropped examples
    num_classes: Optional[int] = None  # labels (after labels_offset) must be in range
    # Hand preprocessing the encoded image (it decodes, e.g. crops while decoding) ...
    decode_in_preprocessing: bool = False
    # ... and the record's boxes as bbox=[1, N, 4] (ymin, xmin, ymax, xmax).
    use_bboxes: bool = False
    # Training passes over the split; None: forever (the scripts). A pass's last partial
    # batch is dropped.
    num_epochs: Optional[int] = None
    # Training only: the pipeline runs on the tf.data service's workers (datasets.data_service).
    data_service: Optional[data_service_lib.ServiceConfig] = None

    def __post_init__(self):
        for name in ('num_readers', 'num_preprocessing_threads'):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f'--{name} must be at least 1 (or unset for AUTOTUNE), '
                                 f'got {value}.')
        if self.num_epochs is not None and self.num_epochs < 1:
            raise ValueError(f'num_epochs must be at least 1 (or None), got {self.num_epochs}.')
        if self.data_service is not None:
            if not self.is_training:
                raise ValueError('The tf.data service serves training input only.')
            # Each data worker would cache, and replay, only the files it was handed.
            if self.cache:
                raise ValueError('--cache keeps one reader\'s records, but with '
                                 '--data_service_address every data worker reads other '
                                 'files each epoch: drop --cache.')
            if self.deterministic:
                raise ValueError('--deterministic cannot hold with --data_service_address: '
                                 'files go to whichever data worker asks first; drop one.')


def _parallelism(value: Optional[int]) -> int:
    return AUTOTUNE if value is None else value


@tf.autograph.experimental.do_not_convert
def _read_shard(path):
    """(record, its file, its index in the file); a damaged shard ends at the damage
    (TFRecordDataset cannot resync after it)."""
    return tf.data.TFRecordDataset(path).ignore_errors().enumerate().map(
        lambda index, record: (record, path, index))


def _has_a_record(path) -> bool:
    """Whether the file's first record reads intact (its checksums hold). TF1's record
    reader reads it in 4 ms; a first tf.data iterator took 45 ms of start-up."""
    try:
        for _ in tf.compat.v1.io.tf_record_iterator(path):
            return True
    except tf.errors.OpError:  # not a TFRecord, damaged, gone: as ignore_errors() skips
        pass
    return False


def _check_has_examples(files):
    """No record at all would make training loop forever on nothing: an error now."""
    if any(_has_a_record(path) for path in files):
        return
    raise DataError(f'No examples in the {len(files)} file(s) of the split (e.g. '
                    f'{files[0]}): they are empty or not TFRecords; convert the data again '
                    f'with download_and_convert_data.py.')


def make_input_fn(spec, preprocess_fn: Callable, config: InputConfig):
    """input_fn(input_context=None) -> the dataset of this input pipeline's batches.

    With config.data_service the pipeline is registered with the service here, once, and
    every training worker's input_fn reads that one job.
    """
    files = spec.list_files()  # raises a UsageError now, not inside tf.data later
    _check_has_examples(files)
    pipeline = _Pipeline(spec, preprocess_fn, config, files)
    if config.data_service is None:
        return pipeline.input_fn
    return _service_input_fn(pipeline)


# Traced as written (no Python control flow on tensors in the pipeline's functions nor in
# preprocessing): AutoGraph converting them and everything they call cost ~0.5 s of
# start-up. Every function handed to tf.data goes through it.
_plain = tf.autograph.experimental.do_not_convert


class _Pipeline:
    """One split read, decoded, preprocessed and batched for one input pipeline of
    num_pipelines: the file list, the config and the run's seed, and the functions
    tf.data traces (each a method, handed over through _plain)."""

    def __init__(self, spec, preprocess_fn: Callable, config: InputConfig, files):
        self.spec, self.preprocess_fn, self.config, self.files = (
            spec, preprocess_fn, config, files)
        self.deterministic = config.deterministic or not config.is_training
        # Without --seed, a run still draws from a seed, its own. Under the service every
        # training worker must build the same graph, and a random salt keys the examples.
        self.run_seed = (config.seed if config.seed is not None
                         else 0 if config.data_service
                         else random.SystemRandom().getrandbits(31))

    def input_fn(self, input_context: Optional[tf.distribute.InputContext] = None):
        num_pipelines = input_context.num_input_pipelines if input_context else 1
        pipeline_id = input_context.input_pipeline_id if input_context else 0
        return self.build(num_pipelines, pipeline_id)

    def build(self, num_pipelines: int, pipeline_id: int) -> tf.data.Dataset:
        config = self.config
        dataset = self._records(num_pipelines, pipeline_id)
        # This pipeline's examples draw from the run seed and its id.
        pipeline_seed = tf.constant([self.run_seed, pipeline_id], tf.int64)
        threads = _parallelism(config.num_preprocessing_threads)
        dataset = dataset.enumerate().batch(_GROUP_SIZE).interleave(
            _plain(functools.partial(self._decode_group, pipeline_seed)),
            cycle_length=threads, block_length=_GROUP_SIZE, num_parallel_calls=threads,
            deterministic=self.deterministic)
        zero = tf.constant(0, tf.int64)
        dataset = dataset.scan((zero, zero), _plain(self._count_skipped))
        if config.is_training:
            # Full batches (static shapes, equal clones): unreadable examples go first.
            dataset = dataset.filter(_plain(_is_readable))
            dataset = dataset.batch(config.batch_size, drop_remainder=True)
        else:
            # Every example once; unreadable ones are masked out of their batch, so the
            # count still reaches the end even if they come last. Batches may be short.
            dataset = dataset.batch(config.batch_size).map(_plain(_mask_unreadable))
        dataset = dataset.map(_plain(_with_skipped_count if config.report_skipped
                                     else _images_and_labels))
        options = tf.data.Options()
        # Augmentation is stateless, but a caller's preprocess_fn may not be: a
        # checkpointed iterator saves the input position, never such a state.
        options.experimental_external_state_policy = (
            tf.data.experimental.ExternalStatePolicy.IGNORE)
        return dataset.prefetch(AUTOTUNE).with_options(options)

    def _records(self, num_pipelines: int, pipeline_id: int) -> tf.data.Dataset:
        """(record, path, index in the file) of this pipeline's share, shuffled to train."""
        config, files = self.config, self.files
        dataset = tf.data.Dataset.from_tensor_slices(files)
        shard_records = len(files) < num_pipelines
        if num_pipelines > 1 and not shard_records:
            dataset = dataset.shard(num_pipelines, pipeline_id)
        # On the service, one pass of the files in order: the dispatcher hands them out
        # and the consumers repeat (a shuffle or repeat here defeats its sharding, measured).
        if config.is_training and not config.cache and not config.data_service:
            dataset = dataset.shuffle(len(files), seed=config.seed).repeat(config.num_epochs)
        readers = _parallelism(config.num_readers)
        dataset = dataset.interleave(
            _read_shard, cycle_length=readers, num_parallel_calls=readers,
            deterministic=self.deterministic)
        if num_pipelines > 1 and shard_records:
            dataset = dataset.shard(num_pipelines, pipeline_id)
        if config.cache:
            dataset = dataset.cache()
            if config.is_training:
                dataset = dataset.repeat(config.num_epochs)
        if config.is_training:
            dataset = dataset.shuffle(config.shuffle_buffer_size, seed=config.seed)
        return dataset

    def _decode_group(self, pipeline_seed, positions, records_paths_indices):
        """Exactly one element per record: decoded, or a placeholder marked unreadable."""
        records, paths, indices = records_paths_indices
        if self.config.data_service:
            # Every data worker numbers its examples from 0: a salt drawn per group
            # (seed 0, 0: from the OS) keeps their augmentations apart.
            salt = tf.raw_ops.RandomUniformInt(
                shape=tf.constant([], tf.int32), minval=tf.constant(0, tf.int64),
                maxval=tf.constant(2 ** 62, tf.int64), seed=0, seed2=0)
            positions = tf.bitwise.bitwise_xor(positions, salt)
        decoded = tf.data.Dataset.from_tensor_slices(
            (records, paths, indices, positions)).map(
                _plain(functools.partial(self._parse_and_preprocess, pipeline_seed)))
        image_spec = decoded.element_spec[0]
        placeholder = (tf.zeros(image_spec.shape, image_spec.dtype),
                       tf.constant(-1, tf.int64), tf.constant(False), tf.constant(''),
                       tf.constant(-1, tf.int64))
        return (decoded.ignore_errors()
                .concatenate(tf.data.Dataset.from_tensors(placeholder).repeat())
                .take(tf.cast(tf.size(records), tf.int64)))

    def _parse_and_preprocess(self, pipeline_seed, serialized, path, index, position):
        config = self.config
        features = self.spec.parse(serialized)
        image = (features['encoded'] if config.decode_in_preprocessing
                 else self.spec.decode_image(features['encoded']))
        kwargs = {'bbox': features['bboxes'][tf.newaxis]} if config.use_bboxes else {}
        if config.is_training:
            kwargs['seed'] = tf.random.experimental.stateless_fold_in(pipeline_seed,
                                                                      position)
        image = self.preprocess_fn(image, config.image_size, config.image_size, **kwargs)
        label = tf.cast(features['label'], tf.int64) - config.labels_offset
        return image, label, tf.constant(True), path, index

    def _count_skipped(self, state, element):
        """scan's step: counts the examples seen and skipped, and stops the job when most
        are unreadable (training) or a label is out of range."""
        config = self.config
        seen, skipped = state
        image, label, readable, path, index = element
        seen, skipped = seen + 1, skipped + tf.cast(tf.logical_not(readable), tf.int64)
        checks = []
        if config.is_training:
            checks.append(_stop_unless(
                tf.logical_or(skipped < _MIN_SKIPPED_TO_FAIL, 2 * skipped < seen),
                'Most examples cannot be decoded ({} of {} so far, the last in {} record '
                '{}); check that --dataset_name and --dataset_dir match the data, or '
                'convert it again.', (skipped, seen, path, index)))
        if config.num_classes is not None:
            in_range = tf.logical_and(label >= 0, label < config.num_classes)
            checks.append(_stop_unless(
                tf.logical_or(tf.logical_not(readable), in_range),
                'Label {} of record {} in {} is outside [0, {}) after --labels_offset={}; '
                'fix the labels of that file, or pass the --dataset_name and '
                '--labels_offset that match the data.',
                (label, index, path, config.num_classes, config.labels_offset)))
        with tf.control_dependencies(checks):
            skipped = tf.identity(skipped)
        return (seen, skipped), (image, label, readable, skipped)


def _is_readable(image, label, readable, skipped):
    del image, label, skipped
    return readable


def _mask_unreadable(images, labels, readable, skipped):
    return (tf.boolean_mask(images, readable), tf.boolean_mask(labels, readable), readable,
            skipped)


def _with_skipped_count(images, labels, readable, skipped):
    del readable
    return images, labels, tf.reduce_max(skipped)


def _images_and_labels(images, labels, *unused):
    del unused
    return images, labels


def _service_input_fn(pipeline: _Pipeline):
    """Registers the pipeline with the tf.data service once, here (bounded waits); every
    training worker's input_fn then reads the one job, unsharded: the dispatcher splits
    the files (pipeline id unused)."""
    service, config = pipeline.config.data_service, pipeline.config
    service_side = pipeline.build(1, 0)
    dataset_id = data_service_lib.register(
        service_side, service, service.dataset_id(dataclasses.astuple(config),
                                                  pipeline.files))
    element_spec = service_side.element_spec

    def service_input_fn(input_context: Optional[tf.distribute.InputContext] = None):
        del input_context
        # Each pass a new iteration of the job: every example once per epoch.
        return data_service_lib.read(service, dataset_id, element_spec).repeat(
            config.num_epochs).prefetch(AUTOTUNE)

    return service_input_fn
