"""Keras's EfficientNetV2 applications into our efficientnet_v2_b0 ... _b3, _s, _m, _l.

The layers pair as EfficientNet's (nets/keras_import/efficientnet.py; the depthwise layer
is 'dwconv2'; fused blocks have 'expand_conv' as their k x k convolution, or only
'project_conv' at expansion 1). Keras's own preprocessing is left out of the model
(`include_preprocessing=False`): our 'efficientnet' / 'efficientnet_v2' preprocessing
does it.
"""
import functools

import keras

from nets.keras_import import efficientnet
from nets.keras_import.counterparts import KerasCounterpart, register

_URL = 'https://storage.googleapis.com/tensorflow/keras-applications/efficientnet_v2/'


def _register(model_name, application, keras_name):
    register(KerasCounterpart(
        model_name=model_name,
        application=application,
        imagenet_url=f'{_URL}{keras_name}.h5',
        pairs=functools.partial(efficientnet.pairs, depthwise_name='dwconv2'),
        # the release's scope: 'efficientnetv2-b0', 'efficientnetv2-s', ...
        classifier_scope=f'efficientnetv2-{model_name.rsplit("_", 1)[1]}/head/dense',
        application_options={'include_preprocessing': False},
    ))


_register('efficientnet_v2_b0', keras.applications.EfficientNetV2B0, 'efficientnetv2-b0')
_register('efficientnet_v2_b1', keras.applications.EfficientNetV2B1, 'efficientnetv2-b1')
_register('efficientnet_v2_b2', keras.applications.EfficientNetV2B2, 'efficientnetv2-b2')
_register('efficientnet_v2_b3', keras.applications.EfficientNetV2B3, 'efficientnetv2-b3')
_register('efficientnet_v2_s', keras.applications.EfficientNetV2S, 'efficientnetv2-s')
_register('efficientnet_v2_m', keras.applications.EfficientNetV2M, 'efficientnetv2-m')
_register('efficientnet_v2_l', keras.applications.EfficientNetV2L, 'efficientnetv2-l')
