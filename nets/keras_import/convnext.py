"""Keras's ConvNeXt applications into our convnext_tiny ... _xlarge.

Keras names every layer after the model ('convnext_tiny'): the stem is a nested
Sequential '<model>_stem' holding '<model>_stem_conv' and '<model>_stem_layernorm'; the
downsampling layers are Sequentials '<model>_downsampling_block_<i>' (before our stage
i + 1) holding '..._downsampling_layernorm_<i>' and '..._downsampling_conv_<i>'; a block's
layers are '<model>_stage_<i>_block_<j>_' + 'depthwise_conv', 'layernorm',
'pointwise_conv_1', 'pointwise_conv_2', 'layer_scale'; the head '<model>_head_layernorm'
and '<model>_head_dense'. Each pairs with the module of ours that plays its part.

Keras's depthwise conv is a grouped Conv2D, kernel [7, 7, 1, c]; ours is [7, 7, c, 1].
The models are built with include_preprocessing=False: their normalisation (ImageNet's
mean and standard deviation, no weights) is our 'convnext' preprocessing's.
"""
import keras
import numpy as np

from nets.keras_import.counterparts import KerasCounterpart, Pair, register

_URL = 'https://storage.googleapis.com/tensorflow/keras-applications/convnext/'


def _depthwise_to_ours(kernel):
    return np.transpose(kernel, (0, 1, 3, 2))


def _dense(keras_layer, our_layer, transform=None):
    """A Keras Conv2D / Dense's kernel and bias into our weighted layer's."""
    depthwise = transform is not None
    yield Pair(keras_layer.kernel,
               our_layer.depthwise_weights if depthwise else our_layer.weights, transform)
    yield Pair(keras_layer.bias, our_layer.biases)


def _layer_norm(keras_layer, our_norm):
    yield Pair(keras_layer.gamma, our_norm.gamma)
    yield Pair(keras_layer.beta, our_norm.beta)


def pairs(keras_model, ours):
    """Every Keras weight with the variable of ours it fills (`ours.network`: our net,
    built)."""
    net, prefix, get = ours.network, keras_model.name, keras_model.get_layer
    stem = get(f'{prefix}_stem')
    our_conv, our_norm = net.stem.layers
    yield from _dense(stem.get_layer(f'{prefix}_stem_conv'), our_conv)
    yield from _layer_norm(stem.get_layer(f'{prefix}_stem_layernorm'), our_norm)
    for i, stage in enumerate(net.stages):
        if stage.downsample is not None:
            downsample = get(f'{prefix}_downsampling_block_{i - 1}')
            our_norm, our_conv = stage.downsample.layers
            yield from _layer_norm(
                downsample.get_layer(f'{prefix}_downsampling_layernorm_{i - 1}'), our_norm)
            yield from _dense(downsample.get_layer(f'{prefix}_downsampling_conv_{i - 1}'),
                              our_conv)
        for j, block in enumerate(stage.blocks):
            name = f'{prefix}_stage_{i}_block_{j}_'
            yield from _dense(get(name + 'depthwise_conv'), block.depthwise_conv,
                              _depthwise_to_ours)
            yield from _layer_norm(get(name + 'layernorm'), block.layer_norm)
            yield from _dense(get(name + 'pointwise_conv_1'), block.pointwise_conv_1)
            yield from _dense(get(name + 'pointwise_conv_2'), block.pointwise_conv_2)
            yield Pair(get(name + 'layer_scale').gamma, block.layer_scale)
    yield from _layer_norm(get(f'{prefix}_head_layernorm'), net.head_norm)
    yield from _dense(get(f'{prefix}_head_dense'), net.logits)


def _register(model_name, application):
    register(KerasCounterpart(
        model_name=model_name,
        application=application,
        imagenet_url=f'{_URL}{model_name}.h5',
        pairs=pairs,
        classifier_scope=f'{model_name}/head/logits',
        application_options={'include_preprocessing': False},
    ))


_register('convnext_tiny', keras.applications.ConvNeXtTiny)
_register('convnext_small', keras.applications.ConvNeXtSmall)
_register('convnext_base', keras.applications.ConvNeXtBase)
_register('convnext_large', keras.applications.ConvNeXtLarge)
_register('convnext_xlarge', keras.applications.ConvNeXtXLarge)
