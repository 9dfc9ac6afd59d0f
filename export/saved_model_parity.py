"""The SavedModel's parity check: every serving signature, fed the parity images in the
form it takes, must compute what the in-process model computes on them.

'serving_default' gets the images decoded to uint8 as evaluation decodes them,
'serving_bytes' the encoded images, 'serving_tf_example' those wrapped in tf.Examples
as the TFRecords hold them, and 'serving_preprocessed' the images preprocessed in
process; so a signature that decodes or preprocesses differently fails.
"""
from typing import Dict, List

import numpy as np
import tensorflow as tf

from datasets import dataset_utils
from export import exporter, parity

_BATCH = 16


def tf_example(encoded: bytes) -> bytes:
    """A serialized tf.Example holding an encoded image under the TFRecords' key."""
    feature = {exporter.ENCODED_IMAGE_FEATURE: dataset_utils.bytes_feature(encoded)}
    return tf.train.Example(
        features=tf.train.Features(feature=feature)).SerializeToString()


def _in_batches(values) -> list:
    return [values[i:i + _BATCH] for i in range(0, len(values), _BATCH)]


def _uint8_batches(encoded, channels: int) -> list:
    """The images decoded as evaluation decodes them, batched in runs of one size (a
    batch has one height and width)."""
    batches = []
    for data in encoded:
        image = dataset_utils.decode_image(tf.constant(data), (None, None, channels)).numpy()
        if batches and batches[-1][0].shape == image.shape and len(batches[-1]) < _BATCH:
            batches[-1].append(image)
        else:
            batches.append([image])
    return [np.stack(batch) for batch in batches]


def signature_inputs(serving: exporter.ServingInfo,
                     examples: parity.Examples) -> Dict[str, list]:
    """Signature -> batches of its input for the examples, in the order checked."""
    preprocessed = _in_batches(examples.images)
    if serving.preprocess is None:  # 'serving_default' is 'serving_preprocessed'
        return {exporter.DEFAULT_SIGNATURE: preprocessed}
    if not examples.encoded:
        return {exporter.PREPROCESSED_SIGNATURE: preprocessed}
    as_strings = lambda values: _in_batches(np.array(values, dtype=object))  # noqa: E731
    return {
        exporter.DEFAULT_SIGNATURE: _uint8_batches(examples.encoded,
                                                   serving.decode_channels),
        exporter.BYTES_SIGNATURE: as_strings(examples.encoded),
        exporter.TF_EXAMPLE_SIGNATURE: as_strings([tf_example(e) for e in examples.encoded]),
        exporter.PREPROCESSED_SIGNATURE: preprocessed,
    }


def check_saved_model(path: str, serving: exporter.ServingInfo, examples: parity.Examples,
                      reference: np.ndarray, tolerance: float) -> List[parity.Result]:
    """One result per signature, each judged as a float format."""
    loaded = tf.saved_model.load(path)
    results = []
    for name, batches in signature_inputs(serving, examples).items():
        signature = loaded.signatures[name]
        (input_name,) = signature.structured_input_signature[1]
        logits = np.concatenate([
            signature(**{input_name: tf.constant(batch)})['logits'].numpy()
            for batch in batches])
        results.append(parity.compare(f'saved_model/{name}', logits, reference,
                                      tolerance=tolerance))
    return results
