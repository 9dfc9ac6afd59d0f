"""Inference exports: a SavedModel with a serving signature, and slim's GraphDef."""
import os

import tensorflow as tf
from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-direct-tensorflow-import

# The serving signature's stable names.
INPUT_NAME = 'images'
OUTPUT_NAMES = ('logits', 'probabilities', 'classes')
# The GraphDef's input placeholder, named as slim's export_inference_graph named it.
GRAPH_INPUT_NAME = 'input'


def _outputs(network, images, labels_offset):
    logits, _ = network(images, training=False)
    if isinstance(logits, (list, tuple)):
        logits = logits[0]
    return {'logits': tf.identity(logits, name='logits'),
            'probabilities': tf.nn.softmax(logits, name='probabilities'),
            # Classes in the dataset's numbering, undoing --labels_offset.
            'classes': tf.add(tf.argmax(logits, axis=-1), labels_offset, name='classes')}


class ServingModule(tf.Module):
    """What the SavedModel holds: the network and its serving function."""

    def __init__(self, network, image_size: int, channels: int = 3, labels_offset: int = 0):
        super().__init__()
        self.network = network
        self.labels_offset = labels_offset
        self.serve = tf.function(
            self._serve,
            input_signature=[tf.TensorSpec([None, image_size, image_size, channels],
                                           tf.float32, name=INPUT_NAME)])

    def _serve(self, images):
        return _outputs(self.network, images, self.labels_offset)


def export_saved_model(network, export_dir: str, *, image_size: int, channels: int = 3,
                       labels_offset: int = 0) -> str:
    """Writes a SavedModel whose 'serving_default' takes preprocessed float images."""
    module = ServingModule(network, image_size, channels, labels_offset)
    tf.saved_model.save(module, export_dir, signatures={'serving_default': module.serve})
    return export_dir


def frozen_graph_def(network, *, image_size: int, batch_size=None, channels: int = 3,
                     labels_offset: int = 0):
    """slim's inference GraphDef: placeholder 'input', weights folded into constants."""

    @tf.function
    def infer(images):
        return _outputs(network, images, labels_offset)

    concrete = infer.get_concrete_function(
        tf.TensorSpec([batch_size, image_size, image_size, channels], tf.float32,
                      name=GRAPH_INPUT_NAME))
    frozen = convert_to_constants.convert_variables_to_constants_v2(concrete)
    return frozen.graph.as_graph_def()


def write_graph_def(graph_def, output_file: str):
    directory = os.path.dirname(output_file)
    if directory:
        tf.io.gfile.makedirs(directory)
    with tf.io.gfile.GFile(output_file + '.tmp', 'wb') as f:
        f.write(graph_def.SerializeToString())
    tf.io.gfile.rename(output_file + '.tmp', output_file, overwrite=True)
