"""Helpers a family's mapping pairs Keras weights with ours by.

A Keras application and our net usually create their layers in the same order, and a
layer's weights play the same roles (Keras 'kernel' is slim's 'weights', 'bias'
'biases', ...): `in_order` pairs them one by one, checking each role and shape on the
way, so a family whose orders agree needs nothing else. Where an order differs, a
family reorders one side before calling `zip_in_order`.
"""
import re
from typing import Iterable, List, Sequence

import numpy as np

from core.naming import slim_name
from nets.keras_import.counterparts import Pair

# Keras's weight name -> slim's.
KERAS_ROLES = {'kernel': 'weights', 'bias': 'biases', 'depthwise_kernel': 'depthwise_weights',
               'pointwise_kernel': 'pointwise_weights', 'gamma': 'gamma', 'beta': 'beta',
               'moving_mean': 'moving_mean', 'moving_variance': 'moving_variance'}
# The order of roles inside one layer (ours: one scope; Keras: one layer).
_ROLE_ORDER = ('weights', 'depthwise_weights', 'pointwise_weights', 'biases', 'gamma',
               'beta', 'moving_mean', 'moving_variance')


def keras_role(layer, variable) -> str:
    """Slim's name for a Keras layer's weight (a depthwise convolution's 'kernel' is
    slim's 'depthwise_weights')."""
    name = variable.path.split('/')[-1]
    if name == 'kernel' and type(layer).__name__ == 'DepthwiseConv2D':
        return 'depthwise_weights'
    return KERAS_ROLES.get(name, variable.path)


def our_role(variable) -> str:
    return slim_name(variable).split('/')[-1]


def _role_rank(role: str) -> int:
    return _ROLE_ORDER.index(role) if role in _ROLE_ORDER else len(_ROLE_ORDER)


def keras_weights_in_order(keras_layers: Iterable) -> list:
    """(role, weight) of the layers' weights, layer after layer, each layer's in
    _ROLE_ORDER."""
    return [entry for layer in keras_layers for entry in sorted(
        ((keras_role(layer, w), w) for w in layer.weights), key=lambda e: _role_rank(e[0]))]


def _call_order(layer) -> int:
    """When the layer was called while the model was built: its output's number
    ('keras_tensor_57'), given in call order."""
    output = layer.output
    name = getattr(output[0] if isinstance(output, (list, tuple)) else output, 'name', '')
    match = re.search(r'(\d+)$', name)
    return int(match.group(1)) if match else 0


def weighted_layers(keras_model, skip: Sequence[str] = ()) -> list:
    """The model's layers that hold weights, in the order the application's code called
    them (Keras lists them by graph depth, which interleaves parallel branches; our
    nets create theirs branch by branch), but those named in skip (preprocessing)."""
    layers = [layer for layer in keras_model.layers
              if layer.weights and layer.name not in skip]
    return sorted(layers, key=_call_order)


def ours_in_order(variables: Sequence) -> list:
    """Our variables in creation order, each scope's in _ROLE_ORDER (the kit creates a
    batch norm's beta before its moving statistics, as Keras; the order is made sure)."""
    scopes = {}
    for variable in variables:
        scopes.setdefault(slim_name(variable).rsplit('/', 1)[0], []).append(variable)
    return [variable for group in scopes.values()
            for variable in sorted(group, key=lambda v: _role_rank(our_role(v)))]


def reshaped_to(shape):
    """A transform giving Keras's array our shape: a Dense kernel [c, n] as a 1x1
    convolution's [1, 1, c, n], or a Dense after Flatten [h*w*c, n] as an h x w
    convolution's [h, w, c, n] (Flatten reads height, width, channels in that order)."""
    target = tuple(shape)
    return lambda array: np.reshape(array, target)


def zip_in_order(keras_weights: Sequence, our_variables: Sequence) -> List[Pair]:
    """Pairs (role, Keras weight)s with our variables one by one; a ValueError at the
    first pair whose roles or sizes differ (the mapping is wrong there), or when the
    counts differ."""
    pairs = []
    for index, ((role, theirs), ours) in enumerate(zip(keras_weights, our_variables)):
        keras_shape, our_shape = tuple(theirs.shape), tuple(ours.shape)
        if role != our_role(ours) or (
                np.prod(keras_shape) != np.prod(our_shape)):
            raise ValueError(f'Pair {index} differs: Keras {theirs.path} {keras_shape} '
                             f'against ours {slim_name(ours)} {our_shape}.')
        transform = None if keras_shape == our_shape else reshaped_to(our_shape)
        pairs.append(Pair(theirs, ours, transform))
    if len(keras_weights) != len(our_variables):
        raise ValueError(f'{len(keras_weights)} Keras weights against {len(our_variables)} '
                         f'of ours after {len(pairs)} pairs.')
    return pairs


def in_order(keras_model, ours, *, skip_layers: Sequence[str] = (),
             unfilled_scopes: Sequence[str] = ()) -> List[Pair]:
    """Every Keras weight (but skip_layers') paired with ours in creation order; our
    variables under unfilled_scopes (e.g. an aux head Keras lacks) are left out first."""
    mine = [v for v in ours_in_order(ours.variables)
            if not any(slim_name(v).startswith(scope) for scope in unfilled_scopes)]
    return zip_in_order(keras_weights_in_order(weighted_layers(keras_model, skip_layers)),
                        mine)
