"""The base of every network: slim's calling convention on the layer kit's Module."""
import contextlib
from typing import Dict, Optional, Tuple

import tensorflow as tf

from nets import layers
from nets.layers.fake_quant import (INPUT_RANGE_SCOPE, ActivationQuantizer, Quantization,
                                    QuantizationParams)
from nets.registry import NetworkSpec


class EndPoints(dict):
    """The end points of a forward pass that may stop early (slim's `final_endpoint`).

    `if end_points.add('Mixed_5b', net): return net, end_points` records an end point
    and says whether it was the one asked for.
    """

    def __init__(self, final_endpoint: Optional[str] = None):
        super().__init__()
        self.final_endpoint = final_endpoint

    def add(self, name: str, tensor: tf.Tensor) -> bool:
        self[name] = tensor
        return name == self.final_endpoint

    def unknown_final_endpoint(self) -> ValueError:
        return ValueError(f'Unknown final endpoint {self.final_endpoint!r}; this net has: '
                          f'{", ".join(self)}.')


class Network(layers.Module):
    """`logits, end_points = net(images)`, with `training` explicit or from construction.

    The net's scope is its slim name ('LeNet', 'InceptionV3', or '' for NASNet's
    root-level variables). Subclasses create their layers in `__init__`, named relative
    to the net, and implement `forward(images, *, training, random_generator)`.
    Computation runs in the images' dtype. With `num_classes=0` a net returns its
    pre-logits features.

    Given at construction: `spec`, the registry's record of the net (nets_factory passes
    it; `default_image_size` reads it), and `quantization`, QuantizationParams that make
    the net quantization-aware: subclasses give `self.quantization` to every weighted
    layer they make, and the net's input gets its range ('input_quant').

    Given per call: `training`; `random_generator`, a tf.random.Generator that dropout
    (and drop-path) draw their masks from, so a checkpoint of it makes a resumed run
    draw what an uninterrupted one would (without one, TensorFlow's global seed); and
    `step`, the training step counter, which reaches only nets that set `uses_step`
    (NASNet's drop-path schedule) and switches quantization on after its delay;
    `product_recording`, lent to the matmul layers for the call
    (nets.layers.weighted.recording_products: the training step's weight factors).

    Nets with a feature extractor (slim's `*_base(final_endpoint=...)`) implement
    `forward_base(images, *, final_endpoint, training) -> (features, EndPoints)`, called
    through `base(...)`, and set `default_final_endpoint`; nets that set `uses_step` get
    `step=` and `random_generator=` there too, nets that set `random_in_base` (their
    residual blocks' drop-path) `random_generator=`.
    """

    default_final_endpoint: Optional[str] = None
    uses_step = False
    random_in_base = False

    def __init__(self, *, scope: str, num_classes: int, is_training: bool,
                 spec: Optional[NetworkSpec] = None,
                 quantization: Optional[QuantizationParams] = None):
        super().__init__(scope)
        self.num_classes = num_classes
        self.is_training = is_training
        self.spec = spec
        # Shared by the net's weighted layers: whether fake quantization is on in a call.
        self.quantization = Quantization(quantization) if quantization else None
        self.input_quantizer = (ActivationQuantizer(self.quantization, INPUT_RANGE_SCOPE)
                                if quantization else None)

    @property
    def default_image_size(self) -> Optional[int]:
        return self.spec.default_image_size if self.spec else None

    def __call__(self, images, training=None, step=None, random_generator=None,
                 product_recording=None) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        training = self.is_training if training is None else training
        # Op names under the net's scope, as slim's, for exports (NASNet has none).
        with self._op_scope(), self._quantized(step, training), \
                layers.recording_products(self, product_recording):
            return super().__call__(self._quantize_input(images, training),
                                    training=training, random_generator=random_generator,
                                    **self._step_argument(step))

    def _op_scope(self):
        return (tf.name_scope(self.relative_name) if self.relative_name
                else contextlib.nullcontext())

    def _quantized(self, step, training):
        return (self.quantization.applied(step, training) if self.quantization
                else contextlib.nullcontext())

    def _quantize_input(self, images, training):
        images = tf.convert_to_tensor(images)
        if self.input_quantizer is None:
            return images
        if self._scope is None:  # the net's scopes first, its input range's under them
            self.resolve_scopes()
        return self.input_quantizer(images, training=training)

    def _step_argument(self, step):
        return {'step': step} if self.uses_step else {}

    def forward(self, images, *, training: bool, random_generator=None):
        raise NotImplementedError

    def base(self, images, final_endpoint: Optional[str] = None, training=None, step=None,
             random_generator=None):
        """slim's `*_base`: the features at `final_endpoint` (the net's last feature
        layer when None) and the end points up to it."""
        if self.default_final_endpoint is None:
            raise NotImplementedError(f'{type(self).__name__} has no feature extractor.')
        training = self.is_training if training is None else training
        if self._scope is None:
            self.resolve_scopes()
        random = ({'random_generator': random_generator}
                  if self.uses_step or self.random_in_base else {})
        with self._op_scope(), self._quantized(step, training):
            return self.forward_base(self._quantize_input(images, training),
                                     final_endpoint=final_endpoint or self.default_final_endpoint,
                                     training=training, **self._step_argument(step), **random)

    def forward_base(self, images, *, final_endpoint: str, training: bool):
        raise NotImplementedError

    def build(self, image_shape, dtype=tf.float32):
        """Creates the variables now, from an input shape (height, width, channels)."""
        if not self.variables:
            self(tf.zeros([1, *image_shape], dtype), training=False)
