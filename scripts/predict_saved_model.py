r"""Loads an exported SavedModel and prints its predictions for image files or a few
dataset examples.

  python scripts/predict_saved_model.py --saved_model_dir=/tmp/export/saved_model \
      --image_files=cat.jpg,dog.png
  python scripts/predict_saved_model.py --saved_model_dir=/tmp/export \
      --dataset_name=shapes --dataset_dir=/tmp/shapes --dataset_split_name=validation \
      --num_examples=8

The encoded images go in as they are to the SavedModel's 'serving_bytes' signature,
which decodes and preprocesses them itself. A SavedModel without it (exported before
image SavedModels always had it) gets them decoded and preprocessed here
(--preprocessing_name), for its float signature: 'serving_preprocessed', or
'serving_default' in such older exports.

An image file that is missing, empty, truncated or not an image is skipped with one
WARNING line naming it, and the others are predicted: the exit status is 0 when at least
one file was predicted, 1 (one ERROR line) when none could be.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cli import startup  # noqa: E402,F401  (first: configures TensorFlow before it loads)
from absl import app, flags  # noqa: E402
import tensorflow as tf  # noqa: E402

from cli import guard  # noqa: E402
from core.errors import UsageError  # noqa: E402
from datasets import dataset_factory, dataset_utils, image_coding  # noqa: E402
from export import exporter  # noqa: E402
from preprocessing import preprocessing_factory  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string('saved_model_dir', None, 'The SavedModel written by '
                    'export_inference_graph.py (--saved_model_dir, or <export_dir>/'
                    'saved_model).')
flags.DEFINE_list('image_files', None, 'Image files (JPEG, PNG, GIF, BMP, WebP) to '
                  'classify; one that cannot be read is skipped with a warning. Default: '
                  '--num_examples examples of the dataset split.')
flags.DEFINE_string('dataset_name', 'shapes', 'The dataset to take examples from.')
flags.DEFINE_string('dataset_dir', None, 'Where the dataset\'s TFRecords are.')
flags.DEFINE_string('dataset_split_name', 'validation', 'The split to read.')
flags.DEFINE_string('preprocessing_name', 'cifarnet', 'The preprocessing the model was '
                    'trained with (only for an older SavedModel without '
                    '\'serving_bytes\').')
flags.DEFINE_integer('num_examples', 8, 'How many dataset examples to predict.')


def _load_signatures(saved_model_dir):
    """The SavedModel's signatures; a directory holding 'saved_model/' also works."""
    if saved_model_dir and not tf.io.gfile.exists(
            os.path.join(saved_model_dir, 'saved_model.pb')):
        saved_model_dir = os.path.join(saved_model_dir, 'saved_model')
    if not saved_model_dir or not tf.io.gfile.exists(
            os.path.join(saved_model_dir, 'saved_model.pb')):
        raise UsageError(f'No SavedModel in {FLAGS.saved_model_dir}; pass '
                         f'--saved_model_dir as written by export_inference_graph.py.')
    return tf.saved_model.load(saved_model_dir).signatures


def _float_signature(signatures):
    """The signature taking preprocessed images; older exports had it as the default."""
    return (exporter.PREPROCESSED_SIGNATURE if exporter.PREPROCESSED_SIGNATURE in signatures
            else exporter.DEFAULT_SIGNATURE)


def run(signatures, encoded_images, preprocessing_name, channels=3):
    """The model's outputs for encoded images: through 'serving_bytes' when the
    SavedModel has it, else preprocessed here for its float signature."""
    if exporter.BYTES_SIGNATURE in signatures:
        return signatures[exporter.BYTES_SIGNATURE](
            **{exporter.BYTES_INPUT_NAME: tf.constant(encoded_images)})
    serve = signatures[_float_signature(signatures)]
    height, width, channels = serve.structured_input_signature[1][
        exporter.INPUT_NAME].shape[1:4]
    preprocess = preprocessing_factory.get_preprocessing(preprocessing_name)
    images = tf.stack([preprocess(dataset_utils.decode_image(tf.constant(encoded),
                                                             (None, None, channels)),
                                  height, width) for encoded in encoded_images])
    return serve(**{exporter.INPUT_NAME: images})


def _read_image(path):
    """The file as JPEG or PNG bytes (other formats re-encoded; a JPEG turned upright by
    its EXIF orientation, as image_folder converts it), or why it cannot be."""
    if not tf.io.gfile.exists(path):
        return None, 'it does not exist'
    try:
        with tf.io.gfile.GFile(path, 'rb') as f:
            data = f.read()
    except (OSError, tf.errors.OpError) as error:
        return None, f'it cannot be read: {error}'
    if not data:
        return None, 'it is empty'
    try:
        return image_coding.check_image(data, apply_orientation=True).data, None
    except image_coding.UnreadableImage as error:
        return None, str(error)


def _read_files(paths):
    """(paths, encoded images) of the files that are images; each other is skipped with
    one line on stderr, so one bad file costs no other file its prediction."""
    readable, encoded = [], []
    for path in paths:
        data, reason = _read_image(path)
        if data is None:
            sys.stderr.write(f'WARNING: skipped {path}: {reason.rstrip(".")}.\n')
            continue
        readable.append(path)
        encoded.append(data)
    if not readable:
        raise UsageError(f'None of the {len(paths)} --image_files is an image TensorFlow '
                         f'can decode (see the warnings above); pass JPEG, PNG, GIF, BMP or '
                         f'WebP files.')
    return readable, encoded


def _name(outputs, index, class_names=None):
    if exporter.CLASS_NAMES_OUTPUT in outputs:
        return outputs[exporter.CLASS_NAMES_OUTPUT].numpy()[index].decode()
    predicted = int(outputs['classes'].numpy()[index])
    return (class_names or {}).get(predicted, str(predicted))


def predict_files(signatures, paths, preprocessing_name):
    paths, encoded = _read_files(paths)
    outputs = run(signatures, encoded, preprocessing_name)
    for index, path in enumerate(paths):
        print(f'{path}: {_name(outputs, index)} '
              f'(class {int(outputs["classes"].numpy()[index])}, '
              f'p={outputs["probabilities"].numpy()[index].max():.3f})')


def predict_examples(signatures, spec, preprocessing_name, num_examples):
    records = list(tf.data.TFRecordDataset(spec.list_files()).take(num_examples))
    parsed = [spec.parse(record) for record in records]
    outputs = run(signatures, [p['encoded'].numpy() for p in parsed], preprocessing_name,
                  spec.image_shape[-1])
    names = spec.labels_to_names
    correct = 0
    for index, example in enumerate(parsed):
        label, predicted = int(example['label']), int(outputs['classes'].numpy()[index])
        correct += int(predicted == label)
        mark = 'ok ' if predicted == label else 'BAD'
        print(f'{mark} label={names.get(label, label):<15} predicted='
              f'{_name(outputs, index, names):<15} '
              f'p={outputs["probabilities"].numpy()[index].max():.3f}')
    print(f'{correct}/{len(parsed)} correct')


def main(argv):
    del argv
    signatures = _load_signatures(FLAGS.saved_model_dir)
    print('Signature:', exporter.BYTES_SIGNATURE if exporter.BYTES_SIGNATURE in signatures
          else f'{_float_signature(signatures)} (preprocessing: {FLAGS.preprocessing_name})')
    if FLAGS.image_files:
        return predict_files(signatures, FLAGS.image_files, FLAGS.preprocessing_name)
    spec = dataset_factory.get_dataset(FLAGS.dataset_name, FLAGS.dataset_split_name,
                                       FLAGS.dataset_dir)
    return predict_examples(signatures, spec, FLAGS.preprocessing_name, FLAGS.num_examples)


if __name__ == '__main__':
    app.run(guard.guarded(main))
