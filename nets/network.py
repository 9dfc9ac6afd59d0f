"""The base of every network: slim's calling convention on a `tf.Module`."""
from typing import Dict, Tuple

import tensorflow as tf

from nets import layers


class Network(tf.Module):
    """`logits, end_points = net(images)`, with `training` explicit or from construction.

    Subclasses create their layers in `__init__` and implement `forward`. With
    `num_classes=0` a net returns its pre-logits features instead of logits.
    """

    default_image_size: int = 224

    def __init__(self, *, scope: str, num_classes: int, is_training: bool):
        super().__init__(name=scope)
        self.scope = scope
        self.num_classes = num_classes
        self.is_training = is_training

    def __call__(self, images, training=None) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        training = self.is_training if training is None else training
        with tf.name_scope(self.scope):
            return self.forward(tf.convert_to_tensor(images), training)

    def forward(self, images, training: bool):
        raise NotImplementedError

    def build(self, image_shape):
        """Creates the variables now, from an input shape (height, width, channels)."""
        if not self.variables:
            self(tf.zeros([1, *image_shape]), training=False)

    def regularization_losses(self):
        """The L2 terms of this net's weight decay, computed from current values."""
        return [loss for layer in self._flatten(predicate=lambda m: isinstance(m, layers.Layer))
                for loss in layer.regularization_losses()]
