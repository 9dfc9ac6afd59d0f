"""The prediction job: an exported SavedModel's class for each image a user names (files,
folders, glob patterns), or for a few examples of a converted dataset.

The encoded images go as they are to the SavedModel's 'serving_bytes' signature, which
decodes and preprocesses them itself. A SavedModel without it (exported before every
image SavedModel had it) gets them decoded and preprocessed here, as --model_name's
family (or --preprocessing_name) does, for its float signature.
"""
import dataclasses
import glob
import os
import sys
from typing import Optional

import tensorflow as tf

from core import checks
from core.errors import UsageError
from datasets import dataset_factory, dataset_utils, image_coding, image_folder
from export import exporter
from preprocessing import preprocessing_factory

# Images sent to the SavedModel at once: a folder of thousands is not one batch.
IMAGES_PER_CALL = 32
_GLOB_CHARACTERS = frozenset('*?[')


@dataclasses.dataclass(frozen=True)
class PredictionJob:
    """Everything predict_image_classifier.py's flags ask for (cli.configs builds it)."""
    saved_model_dir: Optional[str]
    image_files: tuple = ()
    dataset_name: Optional[str] = None
    dataset_dir: Optional[str] = None
    dataset_split_name: Optional[str] = None
    # The family of an older SavedModel without 'serving_bytes'; None: not given.
    preprocessing_name: Optional[str] = None
    num_examples: int = 8

    def __post_init__(self):
        checks.check_at_least(1, num_examples=self.num_examples)


def _is_pattern(entry: str) -> bool:
    return any(character in _GLOB_CHARACTERS for character in entry)


def expand_image_files(entries) -> tuple[list, list]:
    """(paths, [(entry, why it gave no file)]) of --image_files: a folder is every file
    inside it (hidden ones left out, as image_folder converts a folder), a pattern its
    sorted matches; each in the order named, a path named twice once."""
    paths, empty = [], []
    for entry in entries:
        entry = os.path.expanduser(entry)
        if os.path.isdir(entry):
            found = image_folder.list_files(entry)
            why = 'the folder holds no file'
        elif _is_pattern(entry):
            found = []
            for match in sorted(glob.glob(entry, recursive=True)):
                found.extend(image_folder.list_files(match) if os.path.isdir(match)
                             else [match])
            why = 'the pattern matches no file'
        else:
            found, why = [entry], None
        paths.extend(found)
        if not found:
            empty.append((entry, why))
    return list(dict.fromkeys(paths)), empty


def _load_signatures(saved_model_dir: Optional[str]):
    """The SavedModel's signatures; a directory holding 'saved_model/' also works."""
    directory = saved_model_dir
    if directory and not tf.io.gfile.exists(os.path.join(directory, 'saved_model.pb')):
        directory = os.path.join(directory, 'saved_model')
    if not directory or not tf.io.gfile.exists(os.path.join(directory, 'saved_model.pb')):
        raise UsageError(f'No SavedModel in {saved_model_dir}; pass --saved_model_dir as '
                         f'written by export_inference_graph.py (--saved_model_dir, or '
                         f'<export_dir>/saved_model).')
    return tf.saved_model.load(directory).signatures


def _float_signature(signatures) -> str:
    """The signature taking preprocessed images; older exports had it as the default."""
    return (exporter.PREPROCESSED_SIGNATURE if exporter.PREPROCESSED_SIGNATURE in signatures
            else exporter.DEFAULT_SIGNATURE)


class _Model:
    """A SavedModel's classifier of encoded images: 'serving_bytes', else its float
    signature after decoding and preprocessing here."""

    def __init__(self, saved_model_dir: Optional[str], preprocessing_name: Optional[str]):
        self.signatures = _load_signatures(saved_model_dir)
        self.takes_bytes = exporter.BYTES_SIGNATURE in self.signatures
        if not self.takes_bytes and not preprocessing_name:
            raise UsageError(f'{saved_model_dir} has no \'{exporter.BYTES_SIGNATURE}\' '
                             'signature (it was exported before every image SavedModel '
                             'had one): pass the --model_name it was trained as (or its '
                             '--preprocessing_name), or export it again.')
        self.preprocessing_name = preprocessing_name

    def describe(self) -> str:
        return (exporter.BYTES_SIGNATURE if self.takes_bytes else
                f'{_float_signature(self.signatures)} (preprocessing: '
                f'{self.preprocessing_name})')

    def __call__(self, encoded_images, channels: int = 3) -> dict:
        """The outputs (classes, probabilities, class_names if exported) as numpy."""
        outputs = []
        for start in range(0, len(encoded_images), IMAGES_PER_CALL):
            outputs.append(self._run(encoded_images[start:start + IMAGES_PER_CALL],
                                     channels))
        return {key: tf.concat([o[key] for o in outputs], 0).numpy() for key in outputs[0]}

    def _run(self, encoded_images, channels):
        if self.takes_bytes:
            return self.signatures[exporter.BYTES_SIGNATURE](
                **{exporter.BYTES_INPUT_NAME: tf.constant(encoded_images)})
        serve = self.signatures[_float_signature(self.signatures)]
        height, width, channels = serve.structured_input_signature[1][
            exporter.INPUT_NAME].shape[1:4]
        preprocess = preprocessing_factory.get_preprocessing(self.preprocessing_name)
        images = tf.stack([preprocess(dataset_utils.decode_image(
            tf.constant(encoded), (None, None, channels)), height, width)
            for encoded in encoded_images])
        return serve(**{exporter.INPUT_NAME: images})


def _name(outputs: dict, index: int, class_names=None) -> str:
    if exporter.CLASS_NAMES_OUTPUT in outputs:
        return outputs[exporter.CLASS_NAMES_OUTPUT][index].decode()
    predicted = int(outputs['classes'][index])
    return (class_names or {}).get(predicted, str(predicted))


def _read_image(path: str):
    """The file as JPEG or PNG bytes (other formats re-encoded; a JPEG turned upright by
    its EXIF orientation, as image_folder converts it), or why it cannot be."""
    if not tf.io.gfile.exists(path):
        return None, 'it does not exist'
    try:
        with tf.io.gfile.GFile(path, 'rb') as f:
            data = f.read()
        return image_coding.check_image(data, apply_orientation=True).data, None
    except (OSError, tf.errors.OpError) as error:
        return None, f'it cannot be read: {error}'
    except image_coding.UnreadableImage as error:
        return None, str(error)


def predict_files(model: _Model, entries) -> list:
    """Prints one line per image of entries (--image_files); each file that is not one,
    and each folder or pattern without files, is skipped with one WARNING line.
    Returns the predicted paths."""
    paths, empty = expand_image_files(entries)
    for entry, why in empty:
        sys.stderr.write(f'WARNING: skipped {entry}: {why}.\n')
    readable, encoded = [], []
    for path in paths:
        data, reason = _read_image(path)
        if data is None:
            sys.stderr.write(f'WARNING: skipped {path}: {reason.rstrip(".")}.\n')
            continue
        readable.append(path)
        encoded.append(data)
    if not readable:
        raise UsageError(f'None of the {len(paths)} files of --image_files is an image '
                         'TensorFlow can decode (see the warnings above); pass JPEG, PNG, '
                         'GIF, BMP or WebP files, folders of them or patterns matching them.')
    outputs = model(encoded)
    for index, path in enumerate(readable):
        print(f'{path}: {_name(outputs, index)} (class {int(outputs["classes"][index])}, '
              f'p={outputs["probabilities"][index].max():.3f})')
    return readable


def predict_examples(model: _Model, spec: dataset_factory.DatasetSpec,
                     num_examples: int) -> int:
    """Prints each of num_examples examples' label and prediction, then the count right;
    returns it."""
    records = list(tf.data.TFRecordDataset(spec.list_files()).take(num_examples))
    parsed = [spec.parse(record) for record in records]
    outputs = model([p['encoded'].numpy() for p in parsed], spec.image_shape[-1])
    names = spec.labels_to_names
    correct = 0
    for index, example in enumerate(parsed):
        label, predicted = int(example['label']), int(outputs['classes'][index])
        correct += int(predicted == label)
        print(f'{"ok " if predicted == label else "BAD"} label={names.get(label, label):<15} '
              f'predicted={_name(outputs, index, names):<15} '
              f'p={outputs["probabilities"][index].max():.3f}')
    print(f'{correct}/{len(parsed)} correct')
    return correct


def run(job: PredictionJob):
    model = _Model(job.saved_model_dir, job.preprocessing_name)
    print('Signature:', model.describe())
    if job.image_files:
        return predict_files(model, job.image_files)
    spec = dataset_factory.get_dataset(job.dataset_name, job.dataset_split_name,
                                       job.dataset_dir)
    return predict_examples(model, spec, job.num_examples)
