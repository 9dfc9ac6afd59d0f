"""Inference exports: a SavedModel with serving signatures, and slim's GraphDef.

Names every consumer relies on (README "Export and deploy"):
  SavedModel  'serving_default': images (float32 [batch, *input_shape], preprocessed)
              'serving_bytes':   image_bytes (string [batch], encoded JPEG/PNG/GIF/BMP)
              both return logits, probabilities, classes and, when the dataset names
              its classes, class_names.
  GraphDef    placeholder 'input'; nodes 'logits', 'probabilities', 'classes'
              ('class_names' too when the classes are named).
"""
import dataclasses
import os
from typing import Callable, Mapping, Optional

import tensorflow as tf
from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-direct-tensorflow-import

from datasets import dataset_utils

INPUT_NAME = 'images'
BYTES_INPUT_NAME = 'image_bytes'
OUTPUT_NAMES = ('logits', 'probabilities', 'classes')
CLASS_NAMES_OUTPUT = 'class_names'
DEFAULT_SIGNATURE = 'serving_default'
BYTES_SIGNATURE = 'serving_bytes'
# The GraphDef's input placeholder, named as slim's export_inference_graph named it.
GRAPH_INPUT_NAME = 'input'


@dataclasses.dataclass(frozen=True)
class ServingInfo:
    """What an export needs besides the network's weights."""
    input_shape: tuple  # one example: (height, width, channels), frames first for video
    labels_offset: int = 0  # classes are reported in the dataset's numbering
    class_names: Optional[Mapping[int, str]] = None  # dataset label -> name
    # uint8 [H, W, C] image -> float32 input_shape: the net's eval preprocessing at its
    # input size. Given, the SavedModel also gets the 'serving_bytes' signature.
    preprocess: Optional[Callable] = None
    decode_channels: int = 3  # channels of the decoded images preprocess expects

    @property
    def output_names(self):
        return OUTPUT_NAMES + ((CLASS_NAMES_OUTPUT,) if self.class_names else ())

    def decode_and_preprocess(self, encoded):
        """One encoded image -> the network's input, as the bytes signature computes it."""
        image = dataset_utils.decode_image(encoded, (None, None, self.decode_channels))
        return self.preprocess(image)


def _class_name_table(class_names: Mapping[int, str]) -> tf.Tensor:
    """Names indexed by label ('' for labels without one); built inside the trace, so it
    is a constant of the graph."""
    return tf.constant([class_names.get(label, '') for label in range(max(class_names) + 1)])


def outputs(network, images, serving: ServingInfo, training: bool = False):
    """The exported outputs of `network` on preprocessed `images`, with stable names."""
    logits, _ = network(images, training=training)
    if isinstance(logits, (list, tuple)):
        logits = logits[0]
    # Classes in the dataset's numbering, undoing --labels_offset.
    classes = tf.add(tf.argmax(logits, axis=-1), serving.labels_offset, name='classes')
    result = {'logits': tf.identity(logits, name='logits'),
              'probabilities': tf.nn.softmax(logits, name='probabilities'),
              'classes': classes}
    if serving.class_names:
        table = _class_name_table(serving.class_names)
        in_table = tf.minimum(classes, tf.cast(tf.shape(table)[0] - 1, tf.int64))
        result[CLASS_NAMES_OUTPUT] = tf.gather(table, in_table, name=CLASS_NAMES_OUTPUT)
    return result


class ServingModule(tf.Module):
    """What the SavedModel holds: the network and its serving functions."""

    def __init__(self, network, serving: ServingInfo):
        super().__init__()
        self.network = network
        self._serving = serving
        self.serve = tf.function(self._serve, input_signature=[
            tf.TensorSpec([None, *serving.input_shape], tf.float32, name=INPUT_NAME)])
        if serving.preprocess is not None:
            self.serve_bytes = tf.function(self._serve_bytes, input_signature=[
                tf.TensorSpec([None], tf.string, name=BYTES_INPUT_NAME)])

    def _serve(self, images):
        return outputs(self.network, images, self._serving)

    def _serve_bytes(self, image_bytes):
        images = tf.map_fn(self._serving.decode_and_preprocess, image_bytes,
                           fn_output_signature=tf.TensorSpec(self._serving.input_shape,
                                                             tf.float32))
        return self._serve(images)

    def signatures(self):
        result = {DEFAULT_SIGNATURE: self.serve}
        if self._serving.preprocess is not None:
            result[BYTES_SIGNATURE] = self.serve_bytes
        return result


def export_saved_model(network, export_dir: str, serving: ServingInfo) -> str:
    """Writes a SavedModel: 'serving_default' on preprocessed float images and, when
    serving.preprocess is set, 'serving_bytes' on encoded images."""
    module = ServingModule(network, serving)
    tf.saved_model.save(module, export_dir, signatures=module.signatures())
    return export_dir


def _concrete_inference_function(network, serving: ServingInfo, batch_size=None,
                                 training: bool = False, output_names=None):
    """images -> the outputs dict, or with output_names the list of those outputs."""
    @tf.function
    def infer(images):
        result = outputs(network, images, serving, training=training)
        return [result[name] for name in output_names] if output_names else result

    return infer.get_concrete_function(
        tf.TensorSpec([batch_size, *serving.input_shape], tf.float32, name=GRAPH_INPUT_NAME))


def frozen_function(network, serving: ServingInfo, batch_size=None, output_names=None):
    """The inference function with the weights folded into constants (no variables)."""
    return convert_to_constants.convert_variables_to_constants_v2(
        _concrete_inference_function(network, serving, batch_size,
                                     output_names=output_names))


def frozen_graph_def(network, serving: ServingInfo, batch_size=None):
    """slim's inference GraphDef: placeholder 'input', weights folded into constants."""
    return frozen_function(network, serving, batch_size).graph.as_graph_def()


def inference_graph_def(network, serving: ServingInfo, batch_size=None,
                        training: bool = False):
    """The GraphDef before freezing, as slim's export_inference_graph wrote it: the
    structure only, weights read from resource variables it does not hold."""
    return _concrete_inference_function(network, serving, batch_size,
                                         training).graph.as_graph_def()


def write_graph_def(graph_def, output_file: str, as_text: bool = False):
    directory = os.path.dirname(output_file)
    if directory:
        tf.io.gfile.makedirs(directory)
    content = str(graph_def) if as_text else graph_def.SerializeToString()
    with tf.io.gfile.GFile(output_file + '.tmp', 'w' if as_text else 'wb') as f:
        f.write(content)
    tf.io.gfile.rename(output_file + '.tmp', output_file, overwrite=True)


def read_graph_def(path: str, as_text: bool = False):
    """A GraphDef written by write_graph_def."""
    with tf.io.gfile.GFile(path, 'r' if as_text else 'rb') as f:
        content = f.read()
    if as_text:
        from google.protobuf import text_format  # pylint: disable=import-outside-toplevel
        return text_format.Parse(content, tf.compat.v1.GraphDef())
    return tf.compat.v1.GraphDef.FromString(content)


def graph_def_function(graph_def, output_names=OUTPUT_NAMES[:1]):
    """A callable images -> [outputs] running a frozen GraphDef."""
    return tf.compat.v1.wrap_function(
        lambda: tf.compat.v1.import_graph_def(graph_def, name=''), []).prune(
            f'{GRAPH_INPUT_NAME}:0', [f'{name}:0' for name in output_names])
