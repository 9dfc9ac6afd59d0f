"""The base of every network: slim's calling convention on the layer kit's Module."""
import contextlib
from typing import Dict, Tuple

import tensorflow as tf

from nets import layers


class Network(layers.Module):
    """`logits, end_points = net(images)`, with `training` explicit or from construction.

    The net's scope is its slim name ('LeNet', 'InceptionV3', or '' for NASNet's
    root-level variables). Subclasses create their layers in `__init__`, named relative
    to the net, and implement `forward(images, training)`. Computation runs in the
    images' dtype. With `num_classes=0` a net returns its pre-logits features.
    """

    def __init__(self, *, scope: str, num_classes: int, is_training: bool):
        super().__init__(scope)
        self.num_classes = num_classes
        self.is_training = is_training

    def __call__(self, images, training=None) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        training = self.is_training if training is None else training
        # Op names under the net's scope, as slim's, for exports (NASNet has none).
        with (tf.name_scope(self.relative_name) if self.relative_name
              else contextlib.nullcontext()):
            return super().__call__(tf.convert_to_tensor(images), training=training)

    def forward(self, images, *, training: bool):
        raise NotImplementedError

    def build(self, image_shape, dtype=tf.float32):
        """Creates the variables now, from an input shape (height, width, channels)."""
        if not self.variables:
            self(tf.zeros([1, *image_shape], dtype), training=False)
