"""Which Keras application equals which of our nets, and how their weights pair up.

A family module registers one KerasCounterpart per net name (nets/keras_import/catalog.py
imports the family modules; slim_nets.py is the simplest example). The engine
(nets/keras_import/transfer.py) builds

    application(weights=None, include_top=True, classes=1000,
                classifier_activation=None, input_shape=(size, size, 3),
                **application_options)

and our net with 1,000 classes, and takes the pairs from `pairs(keras_model, ours)`
(ours: a transfer.OurNet, the built net and its variables in creation order).
"""
import dataclasses
import os
from typing import Callable, Dict, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from core.errors import UsageError

KERAS_CLASSES = 1000


@dataclasses.dataclass(frozen=True)
class Pair:
    """One Keras weight and the variable of ours it fills; transform (numpy -> numpy)
    turns Keras's layout into ours, e.g. a Dense kernel into a 1x1 convolution's."""
    keras_variable: object
    our_variable: tf.Variable
    transform: Optional[Callable[[np.ndarray], np.ndarray]] = None


@dataclasses.dataclass(frozen=True)
class KerasCounterpart:
    """A Keras application whose architecture equals our net `model_name`."""
    model_name: str
    application: Callable  # e.g. keras.applications.InceptionV3
    imagenet_url: str  # what Keras downloads for weights='imagenet' (include_top=True)
    pairs: Callable  # (keras_model, ours) -> Iterable[Pair], every Keras weight once
    # Our classifier's scope, e.g. 'InceptionV3/Logits': what a fine-tune on other
    # classes leaves out (--checkpoint_exclude_scopes), and nothing else.
    classifier_scope: str
    application_options: Mapping = dataclasses.field(default_factory=dict)
    # The first layer after Keras's own preprocessing (Rescaling / Normalization layers
    # before the first weighted one, found by transfer.preprocessing_layers; their
    # weights are not imported).
    keras_input_layer: Optional[str] = None
    unfilled_scopes: Tuple[str, ...] = ()  # our variables Keras has none for
    network_options: Mapping = dataclasses.field(default_factory=dict)
    keras_input_bgr: bool = False  # Keras feeds BGR (caffe): our first kernel is flipped
    min_image_size: int = 32  # the smallest square input both nets accept

    @property
    def imagenet_file(self) -> str:
        """The file name Keras caches the ImageNet weights under (<keras home>/models/)."""
        return os.path.basename(self.imagenet_url)

    def build_keras(self, image_size: int):
        """The Keras application, without weights, giving logits for 1,000 classes."""
        return self.application(weights=None, include_top=True, classes=KERAS_CLASSES,
                                classifier_activation=None,
                                input_shape=(image_size, image_size, 3),
                                **self.application_options)

    def is_unfilled(self, name: str) -> bool:
        return any(name.startswith(scope) for scope in self.unfilled_scopes)

    def fine_tune_exclude_scopes(self) -> Tuple[str, ...]:
        """What a fine-tune on other classes leaves out: the classifier and the layers
        Keras has no weights for (e.g. an aux head, which also predicts 1,000 classes)."""
        return (self.classifier_scope, *(s.rstrip('/') for s in self.unfilled_scopes))


_COUNTERPARTS: Dict[str, KerasCounterpart] = {}


def register(counterpart: KerasCounterpart) -> KerasCounterpart:
    if counterpart.model_name in _COUNTERPARTS:
        raise ValueError(f'{counterpart.model_name!r} has two Keras counterparts.')
    _COUNTERPARTS[counterpart.model_name] = counterpart
    return counterpart


def names() -> list:
    return sorted(_COUNTERPARTS)


def get(model_name: str) -> KerasCounterpart:
    """The counterpart of our net `model_name`; a UsageError listing the supported names
    for any other."""
    if model_name not in _COUNTERPARTS:
        raise UsageError(f'--model_name={model_name} has no Keras application with its '
                         f'architecture; Keras weights import into: {", ".join(names())}.')
    return _COUNTERPARTS[model_name]
