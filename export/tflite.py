"""TFLite models, float and int8, converted from the frozen inference function.

Converting a SavedModel whose module holds resource variables gave a model that outputs
NaN (and int8 conversion failed); from the frozen concrete function both work.

A quantization-aware net (nets.quantization) is frozen with its FakeQuant ops, and the
converter (TF 2.21, measured) honours them: each fake-quantized tensor of the int8 model
takes its scale and zero point from the learned range ((max - min) / 255; the input's
and the logits' included), conv + batch norm + ReLU fuse into one int8 kernel with
per-channel weights, and only tensors without a FakeQuant op (local response
normalization, pools' requantization, residual sums, concatenations) are calibrated on
the representative images, still required for full-int8 conversion. Measured limits:
per-channel fake quantization on MatMul weights fails ("'tfl.transpose' op has
mismatched quantized axes"), and a reshape around a per-channel op fails ("'tfl.reshape'
op requires 'output' type ..."), hence per-tensor fully connected and depthwise weights.
The float model of such a net carries the fake quantization as QUANTIZE/DEQUANTIZE
pairs. Checked on cifarnet, mobilenet_v1 and mobilenet_v2 (depthwise, residual sums).

The model's one signature, 'serving_default', takes 'input' [batch, *input_shape]
(float32, or uint8/float32 for int8 per io_dtype) and returns 'logits' and
'probabilities'. A uint8 tensor holds round(x / scale + zero_point); the scale and
zero point are in the interpreter's input and output details.
"""
from typing import Iterable, Optional

import numpy as np
import tensorflow as tf

from export import exporter

SIGNATURE = 'serving_default'
INPUT_NAME = exporter.GRAPH_INPUT_NAME
OUTPUT_NAMES = ('logits', 'probabilities')
IO_DTYPES = {'uint8': tf.uint8, 'float32': tf.float32}


def Interpreter(**kwargs):  # pylint: disable=invalid-name  (stands for the class)
    """LiteRT's interpreter (TFLite's runtime package; tf.lite.Interpreter is deprecated
    in its favour), imported on first use: 35 ms that training and evaluation skip."""
    try:
        # pylint: disable-next=import-outside-toplevel
        from ai_edge_litert.interpreter import Interpreter as interpreter_class
    except ImportError:  # pragma: no cover  (requirements.txt installs it)
        interpreter_class = tf.lite.Interpreter
    return interpreter_class(**kwargs)


def _named_frozen_function(network, serving: exporter.ServingInfo, batch_size: int):
    """The frozen function re-wrapped so the TFLite signature names its outputs
    (freezing turns the output dict into a list)."""
    frozen = exporter.frozen_function(network, serving, batch_size, OUTPUT_NAMES)

    @tf.function
    def named(images):
        return dict(zip(OUTPUT_NAMES, frozen(images)))

    return named.get_concrete_function(
        tf.TensorSpec([batch_size, *serving.input_shape], tf.float32, name=INPUT_NAME))


def _tflite_serving(serving: exporter.ServingInfo) -> exporter.ServingInfo:
    """TFLite models output numbers only: no class-name strings."""
    return exporter.ServingInfo(input_shape=serving.input_shape,
                                labels_offset=serving.labels_offset)


def convert(network, serving: exporter.ServingInfo, *, batch_size: int = 1,
            int8: bool = False, representative_images: Optional[Iterable] = None,
            io_dtype: str = 'uint8') -> bytes:
    """A float TFLite model, or with int8 a fully int8-quantized one calibrated on
    representative_images (float32 arrays of one example's shape)."""
    function = _named_frozen_function(network, _tflite_serving(serving), batch_size)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], tf.Module())
    if int8:
        images = np.asarray(list(representative_images), np.float32)
        batches = [images[i:i + batch_size] for i in range(0, len(images) - batch_size + 1,
                                                            batch_size)]
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([batch] for batch in batches)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = IO_DTYPES[io_dtype]
        converter.inference_output_type = IO_DTYPES[io_dtype]
    return converter.convert()


def _quantize(values, details):
    scale, zero_point = details['quantization']
    if details['dtype'] == np.float32 or not scale:
        return values.astype(details['dtype'])
    info = np.iinfo(details['dtype'])
    return np.clip(np.round(values / scale + zero_point), info.min, info.max).astype(
        details['dtype'])


def _dequantize(values, details):
    scale, zero_point = details['quantization']
    if details['dtype'] == np.float32 or not scale:
        return values.astype(np.float32)
    return (values.astype(np.float32) - zero_point) * scale


class Runner:
    """Runs a TFLite model on float32 images, (de)quantizing at its edges."""

    def __init__(self, model_path: str):
        self._interpreter = Interpreter(model_path=model_path)
        self._runner = self._interpreter.get_signature_runner(SIGNATURE)
        self._input = self._runner.get_input_details()[INPUT_NAME]
        self._outputs = self._runner.get_output_details()
        self.batch_size = int(self._input['shape'][0])

    def __call__(self, images: np.ndarray) -> dict:
        """{'logits', 'probabilities'} as float32 for float32 images [N, ...]."""
        results = []
        for start in range(0, len(images), self.batch_size):
            batch = images[start:start + self.batch_size]
            padding = self.batch_size - len(batch)
            if padding:
                batch = np.concatenate([batch, np.repeat(batch[-1:], padding, axis=0)])
            raw = self._runner(**{INPUT_NAME: _quantize(batch, self._input)})
            results.append({name: _dequantize(raw[name], self._outputs[name])[:len(batch)
                                                                           - padding]
                            for name in OUTPUT_NAMES})
        return {name: np.concatenate([r[name] for r in results]) for name in OUTPUT_NAMES}
