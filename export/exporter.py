"""Inference exports: a SavedModel with serving signatures, and slim's GraphDef.

Names every consumer relies on (docs/export.md):
  SavedModel  'serving_default':      images (uint8 [batch, H, W, C], any H and W)
              'serving_bytes':        image_bytes (string [batch], encoded JPEG, PNG,
                                      GIF, BMP or WebP, any size and colour layout)
              'serving_tf_example':   serialized_examples (string [batch], tf.Examples
                                      holding 'image/encoded', as the TFRecords do)
              'serving_preprocessed': images (float32 [batch, *input_shape], already
                                      preprocessed)
              The first three apply the network's evaluation preprocessing. A net
              without image preprocessing (video nets) has only 'serving_preprocessed',
              also as 'serving_default'. Every signature returns logits,
              probabilities, classes and, when the dataset names its classes,
              class_names.
  GraphDef    placeholder 'input'; nodes 'logits', 'probabilities', 'classes'
              ('class_names' too when the classes are named).
"""
import dataclasses
import functools
import os
from typing import Callable, Mapping, Optional

import tensorflow as tf
from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-direct-tensorflow-import

from export import slim_graph

INPUT_NAME = 'images'  # uint8 images of 'serving_default', float32 of 'serving_preprocessed'
BYTES_INPUT_NAME = 'image_bytes'
EXAMPLES_INPUT_NAME = 'serialized_examples'
OUTPUT_NAMES = ('logits', 'probabilities', 'classes')
CLASS_NAMES_OUTPUT = 'class_names'
DEFAULT_SIGNATURE = 'serving_default'
BYTES_SIGNATURE = 'serving_bytes'
TF_EXAMPLE_SIGNATURE = 'serving_tf_example'
PREPROCESSED_SIGNATURE = 'serving_preprocessed'
# The feature of the toolkit's TFRecords holding the encoded image (datasets/dataset_utils.py).
ENCODED_IMAGE_FEATURE = 'image/encoded'
# The GraphDef's input placeholder, named as slim's export_inference_graph named it.
GRAPH_INPUT_NAME = 'input'
_PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


def decode_image(encoded, channels: int):
    """uint8 [H, W, channels] (1 or 3) from JPEG, PNG, GIF, BMP or WebP bytes, whatever
    their colour layout (grey, grey + alpha, RGB, RGBA).

    JPEG and PNG are decoded as the input pipeline decodes them, so the bytes signatures
    see the pixels evaluation sees. TensorFlow refuses some layouts of the others (RGBA
    WebP as 3 channels, any GIF, BMP or WebP as 1), so those are decoded as stored and
    converted here the way its decoders convert: alpha dropped, grey repeated.
    """
    def as_the_input_pipeline():
        return tf.io.decode_image(encoded, channels=channels, expand_animations=False)

    def as_stored_then_converted():
        image = tf.io.decode_image(encoded, channels=0, expand_animations=False)
        have = tf.shape(image)[-1]
        rgb = tf.gather(image, tf.where(have >= 3, [0, 1, 2], [0, 0, 0]), axis=-1)
        if channels == 3:
            return rgb
        return tf.cond(have >= 3, lambda: tf.image.rgb_to_grayscale(rgb),
                       lambda: image[..., :1])

    jpeg_or_png = tf.io.is_jpeg(encoded) | tf.equal(tf.strings.substr(encoded, 0, 8),
                                                    _PNG_SIGNATURE)
    image = tf.cond(jpeg_or_png, as_the_input_pipeline, as_stored_then_converted)
    return tf.ensure_shape(image, (None, None, channels))


@dataclasses.dataclass(frozen=True)
class ServingInfo:
    """What an export needs besides the network's weights."""
    input_shape: tuple  # one example: (height, width, channels), frames first for video
    labels_offset: int = 0  # classes are reported in the dataset's numbering
    class_names: Optional[Mapping[int, str]] = None  # dataset label -> name
    # uint8 [H, W, C] image -> float32 input_shape: the net's eval preprocessing at its
    # input size. Given, the SavedModel's 'serving_default' takes uint8 images and it
    # has the encoded-image signatures; without it, only preprocessed inputs.
    preprocess: Optional[Callable] = None
    decode_channels: int = 3  # C of the uint8 images preprocess expects

    @property
    def output_names(self):
        return OUTPUT_NAMES + ((CLASS_NAMES_OUTPUT,) if self.class_names else ())

    def preprocess_images(self, images):
        """uint8 [batch, H, W, C] -> the network's input batch, image by image."""
        return tf.map_fn(self.preprocess, images,
                         fn_output_signature=tf.TensorSpec(self.input_shape, tf.float32))

    def decode_and_preprocess(self, encoded):
        """One encoded image -> the network's input, as the bytes signature computes it."""
        return self.preprocess(decode_image(encoded, self.decode_channels))


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
        self.serve_preprocessed = tf.function(self._serve_preprocessed, input_signature=[
            tf.TensorSpec([None, *serving.input_shape], tf.float32, name=INPUT_NAME)])
        if serving.preprocess is not None:
            self.serve_images = tf.function(self._serve_images, input_signature=[
                tf.TensorSpec([None, None, None, serving.decode_channels], tf.uint8,
                              name=INPUT_NAME)])
            self.serve_bytes = tf.function(self._serve_bytes, input_signature=[
                tf.TensorSpec([None], tf.string, name=BYTES_INPUT_NAME)])
            self.serve_tf_example = tf.function(self._serve_tf_example, input_signature=[
                tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT_NAME)])

    def _serve_preprocessed(self, images):
        return outputs(self.network, images, self._serving)

    def _serve_images(self, images):
        return self._serve_preprocessed(self._serving.preprocess_images(images))

    def _serve_bytes(self, image_bytes):
        images = tf.map_fn(self._serving.decode_and_preprocess, image_bytes,
                           fn_output_signature=tf.TensorSpec(self._serving.input_shape,
                                                             tf.float32))
        return self._serve_preprocessed(images)

    def _serve_tf_example(self, serialized_examples):
        features = tf.io.parse_example(serialized_examples, {
            ENCODED_IMAGE_FEATURE: tf.io.FixedLenFeature([], tf.string)})
        return self._serve_bytes(features[ENCODED_IMAGE_FEATURE])

    def signatures(self):
        """Signature name -> function; see the module's docstring."""
        if self._serving.preprocess is None:  # video nets: preprocessed clips only
            return {DEFAULT_SIGNATURE: self.serve_preprocessed,
                    PREPROCESSED_SIGNATURE: self.serve_preprocessed}
        return {DEFAULT_SIGNATURE: self.serve_images, BYTES_SIGNATURE: self.serve_bytes,
                TF_EXAMPLE_SIGNATURE: self.serve_tf_example,
                PREPROCESSED_SIGNATURE: self.serve_preprocessed}


def export_saved_model(network, export_dir: str, serving: ServingInfo) -> str:
    """Writes a SavedModel with the signatures of ServingModule.signatures."""
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


def _graph_input(serving: ServingInfo, batch_size=None):
    return tf.TensorSpec([batch_size, *serving.input_shape], tf.float32,
                         name=GRAPH_INPUT_NAME)


def frozen_graph_def(network, serving: ServingInfo, batch_size=None):
    """slim's frozen graph: placeholder 'input', weights folded into constants, our
    output nodes and TF-Slim's (export/slim_graph.py)."""
    return slim_graph.frozen_graph_def(
        network, functools.partial(outputs, serving=serving), _graph_input(serving, batch_size))


def inference_graph_def(network, serving: ServingInfo, batch_size=None,
                        training: bool = False):
    """The GraphDef before freezing, as slim's export_inference_graph wrote it: variable
    nodes under TF-Slim's names without values, for freeze_graph to restore a
    checkpoint into by name; our output nodes and TF-Slim's."""
    return slim_graph.inference_graph_def(
        network, functools.partial(outputs, serving=serving),
        _graph_input(serving, batch_size), training)


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
