"""Keras's EfficientNet B0-B7 applications into our efficientnet_b0 ... _b7, and the pairing
EfficientNetV2's mapping (nets/keras_import/efficientnet_v2.py) shares.

Keras names every layer of these applications: 'stem_conv' / 'stem_bn', per block
'block<stage><letter>_' + 'expand_conv', 'expand_bn', 'dwconv' (V2: 'dwconv2'), 'bn',
'se_reduce', 'se_expand', 'project_conv', 'project_bn', then 'top_conv' / 'top_bn' and
'predictions'. Blocks come in the order of our `net.blocks`; each layer pairs with the
module of ours that plays its part, so no variable name is matched.

Keras's B0-B7 carry their preprocessing as layers (Rescaling 1/255, then a Normalization
whose statistics are ImageNet's mean and variance): the model is sliced from
'stem_conv_pad' on (the engine finds those layers by type, their names vary), our
'efficientnet' preprocessing does that part.
"""
import re

import keras

from nets import layers
from nets.keras_import.counterparts import KerasCounterpart, Pair, register

_BLOCK = re.compile(r'^(block\d+[a-z])_')


def _weighted(keras_layer, our_layer):
    """A Keras Conv2D / DepthwiseConv2D / Dense's kernel (and bias) into our layer's."""
    depthwise = isinstance(our_layer, layers.SeparableConv2D)
    yield Pair(keras_layer.kernel,
               our_layer.depthwise_weights if depthwise else our_layer.weights)
    if getattr(keras_layer, 'use_bias', False):
        yield Pair(keras_layer.bias, our_layer.biases)


def _batch_norm(keras_layer, our_layer):
    norm = our_layer.batch_norm
    for role in ('gamma', 'beta', 'moving_mean', 'moving_variance'):
        yield Pair(getattr(keras_layer, role), getattr(norm, role))


def _conv_bn(keras_model, conv_name, bn_name, our_layer):
    yield from _weighted(keras_model.get_layer(conv_name), our_layer)
    yield from _batch_norm(keras_model.get_layer(bn_name), our_layer)


def block_prefixes(keras_model) -> list:
    """'block1a_', 'block2a_', ... in the model's order."""
    names = (_BLOCK.match(layer.name) for layer in keras_model.layers)
    return list(dict.fromkeys(match.group(0) for match in names if match))


def pairs(keras_model, ours, depthwise_name='dwconv'):
    """Every Keras weight with the variable of ours it fills (`ours.network`: our net,
    built)."""
    net = ours.network
    get = keras_model.get_layer
    yield from _conv_bn(keras_model, 'stem_conv', 'stem_bn', net.stem)
    prefixes = block_prefixes(keras_model)
    if len(prefixes) != len(net.blocks):
        raise ValueError(f'Keras has {len(prefixes)} blocks, our net {len(net.blocks)}.')
    for prefix, block in zip(prefixes, net.blocks):
        if block.expand is not None:
            yield from _conv_bn(keras_model, prefix + 'expand_conv', prefix + 'expand_bn',
                                block.expand)
        if block.depthwise is not None:
            yield from _conv_bn(keras_model, prefix + depthwise_name, prefix + 'bn',
                                block.depthwise)
        if block.squeeze_excite is not None:
            yield from _weighted(get(prefix + 'se_reduce'), block.squeeze_excite.reduce)
            yield from _weighted(get(prefix + 'se_expand'), block.squeeze_excite.expand)
        yield from _conv_bn(keras_model, prefix + 'project_conv', prefix + 'project_bn',
                            block.project)
    yield from _conv_bn(keras_model, 'top_conv', 'top_bn', net.head)
    yield from _weighted(get('predictions'), net.logits)


def _register(model_name, application, keras_name):
    register(KerasCounterpart(
        model_name=model_name,
        application=application,
        imagenet_url=f'https://storage.googleapis.com/keras-applications/{keras_name}.h5',
        pairs=pairs,
        classifier_scope=f'{model_name.replace("_", "-")}/head/dense',  # 'efficientnet-b0'
        keras_input_layer='stem_conv_pad',
    ))


_register('efficientnet_b0', keras.applications.EfficientNetB0, 'efficientnetb0')
_register('efficientnet_b1', keras.applications.EfficientNetB1, 'efficientnetb1')
_register('efficientnet_b2', keras.applications.EfficientNetB2, 'efficientnetb2')
_register('efficientnet_b3', keras.applications.EfficientNetB3, 'efficientnetb3')
_register('efficientnet_b4', keras.applications.EfficientNetB4, 'efficientnetb4')
_register('efficientnet_b5', keras.applications.EfficientNetB5, 'efficientnetb5')
_register('efficientnet_b6', keras.applications.EfficientNetB6, 'efficientnetb6')
_register('efficientnet_b7', keras.applications.EfficientNetB7, 'efficientnetb7')
