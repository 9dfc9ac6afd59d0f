r"""Loads an exported SavedModel and prints its predictions for a few dataset examples.

  python scripts/predict_saved_model.py --saved_model_dir=/tmp/export \
      --dataset_name=shapes --dataset_dir=/tmp/shapes --dataset_split_name=validation \
      --preprocessing_name=cifarnet --num_examples=8
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cli import startup  # noqa: E402,F401  (first: configures TensorFlow before it loads)
from absl import app, flags  # noqa: E402
import tensorflow as tf  # noqa: E402

from datasets import dataset_factory  # noqa: E402
from cli import guard  # noqa: E402
from core.errors import UsageError  # noqa: E402
from preprocessing import preprocessing_factory  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string('saved_model_dir', None, 'The SavedModel written by '
                    'export_inference_graph.py --saved_model_dir.')
flags.DEFINE_string('dataset_name', 'shapes', 'The dataset to take examples from.')
flags.DEFINE_string('dataset_dir', None, 'Where the dataset\'s TFRecords are.')
flags.DEFINE_string('dataset_split_name', 'validation', 'The split to read.')
flags.DEFINE_string('preprocessing_name', 'cifarnet', 'The preprocessing the model was '
                    'trained with.')
flags.DEFINE_integer('num_examples', 8, 'How many examples to predict.')


def predict(saved_model_dir, spec, preprocessing_name, num_examples):
    if not saved_model_dir or not tf.io.gfile.exists(
            os.path.join(saved_model_dir, 'saved_model.pb')):
        raise UsageError(f'No SavedModel in {saved_model_dir}; pass --saved_model_dir '
                         f'as written by export_inference_graph.py.')
    serve = tf.saved_model.load(saved_model_dir).signatures['serving_default']
    height, width = serve.structured_input_signature[1]['images'].shape[1:3]
    preprocess = preprocessing_factory.get_preprocessing(preprocessing_name)
    records = tf.data.TFRecordDataset(spec.list_files()).take(num_examples)
    decoded = [spec.decode(record) for record in records]
    images = tf.stack([preprocess(image, height, width) for image, _ in decoded])
    outputs = serve(images=images)
    names = spec.labels_to_names
    correct = 0
    for (_, label), predicted, probabilities in zip(
            decoded, outputs['classes'].numpy(), outputs['probabilities'].numpy()):
        label = int(label)
        correct += int(predicted == label)
        mark = 'ok ' if predicted == label else 'BAD'
        print(f'{mark} label={names.get(label, label):<15} predicted='
              f'{names.get(int(predicted), predicted):<15} p={probabilities.max():.3f}')
    print(f'{correct}/{len(decoded)} correct')


def main(argv):
    del argv
    spec = dataset_factory.get_dataset(FLAGS.dataset_name, FLAGS.dataset_split_name,
                                       FLAGS.dataset_dir)
    predict(FLAGS.saved_model_dir, spec, FLAGS.preprocessing_name, FLAGS.num_examples)


if __name__ == '__main__':
    app.run(guard.guarded(main))
