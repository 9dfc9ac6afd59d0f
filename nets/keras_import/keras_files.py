"""Loading a Keras weights file strictly: all of it, into a model of its architecture.

Keras writes two formats: the legacy HDF5 of Keras 2 (`.h5`, what keras.applications
downloads: layers in model order, each with its weight names) and Keras 3's
`.weights.h5` (layers under 'layers/<class name>[_<n>]/vars/<i>', numbered by class in
model order; a nested Sequential's under '<its path>/layers/...'). A file of another architecture ends in one line naming the first tensor
whose shape differs (or the first layer one side lacks); Keras's own error lists every
object it could not load.
"""
import collections
import os
import re
from typing import Iterator, Optional, Tuple

import h5py

from core.errors import UsageError

_SUFFIXES = ('.weights.h5', '.h5', '.hdf5', '.keras')


def _snake_case(name: str) -> str:
    """Keras 3's object naming: 'BatchNormalization' -> 'batch_normalization'."""
    name = re.sub(r'\W+', '', name)
    name = re.sub(r'(.)([A-Z][a-z]+)', r'\1_\2', name)
    return re.sub(r'([a-z])([A-Z])', r'\1_\2', name).lower()


def _model_layers(keras_model) -> Iterator:
    return (layer for layer in keras_model.layers if layer.weights)


def _keras3_entries(keras_model, file) -> Iterator[Tuple[str, tuple, Optional[tuple]]]:
    """(file path, model's shape, file's shape or None) of every model weight."""
    yield from _keras3_container(keras_model.layers, 'layers', file)


def _keras3_container(container_layers, where: str, file):
    """Keras 3 numbers a container's layers by class name, every layer counted, weighted
    or not; a nested Sequential or Functional (ConvNeXt's stem) holds its own numbered
    list under '<its path>/layers'."""
    counts = collections.Counter()
    for layer in container_layers:
        base = _snake_case(type(layer).__name__)
        path = f'{where}/{base if counts[base] == 0 else f"{base}_{counts[base]}"}'
        counts[base] += 1
        nested = getattr(layer, 'layers', None)
        if nested:
            yield from _keras3_container(nested, f'{path}/layers', file)
            continue
        for index, weight in enumerate(layer.weights):
            stored = file.get(f'{path}/vars/{index}')
            yield (f'{path}/vars/{index} ({weight.path})', tuple(weight.shape),
                   tuple(stored.shape) if isinstance(stored, h5py.Dataset) else None)


def _legacy_entries(keras_model, group) -> Iterator[Tuple[str, tuple, Optional[tuple]]]:
    """As _keras3_entries, for Keras 2's layout, where layers pair up by order."""
    stored_layers = [name.decode() if isinstance(name, bytes) else name
                     for name in group.attrs['layer_names']]
    stored_layers = [n for n in stored_layers if len(group[n].attrs['weight_names'])]
    layers = list(_model_layers(keras_model))
    for position, layer in enumerate(layers):
        if position >= len(stored_layers):
            yield f'layer #{position} ({layer.name})', ('a layer',), None
            return
        stored = group[stored_layers[position]]
        names = [n.decode() if isinstance(n, bytes) else n
                 for n in stored.attrs['weight_names']]
        for index, weight in enumerate(layer.weights):
            shape = tuple(stored[names[index]].shape) if index < len(names) else None
            yield f'{stored_layers[position]}/{names[index] if shape else index}', \
                tuple(weight.shape), shape
        if len(names) > len(layer.weights):
            yield f'{stored_layers[position]}/{names[len(layer.weights)]}', None, ()
    if len(stored_layers) > len(layers):
        yield f'{stored_layers[len(layers)]} (an extra layer)', None, ()


def first_mismatch(keras_model, path: str) -> Optional[str]:
    """The first tensor of the file that does not fit the model, described; None."""
    with h5py.File(path, 'r') as file:
        if 'layer_names' in file.attrs or 'model_weights' in file:
            group = file['model_weights'] if 'model_weights' in file else file
            entries = _legacy_entries(keras_model, group)
        else:
            entries = _keras3_entries(keras_model, file)
        for where, expected, stored in entries:
            if expected != stored:
                if stored is None:
                    return f'it lacks {where}, of shape {expected}'
                if expected is None:
                    return f'it holds {where}, which the model lacks'
                return f'{where} has shape {stored}, the model\'s {expected}'
    return None


def load_weights_file(keras_model, path: str) -> None:
    """Loads all of `path` into keras_model; a UsageError (one line) for a missing or
    unreadable file and for one of another architecture."""
    if not os.path.isfile(path):
        raise UsageError(f'--keras_weights={path} is not a file; pass a Keras weights '
                         f'file ({", ".join(_SUFFIXES[:2])}) or imagenet.')
    if not h5py.is_hdf5(path):
        raise UsageError(f'--keras_weights={path} is not a Keras weights file (not HDF5); '
                         f'pass a {" or ".join(_SUFFIXES[:2])} file or imagenet.')
    architecture = f'another architecture than {keras_model.name}\'s'
    try:
        mismatch = first_mismatch(keras_model, path)
    except (OSError, KeyError, ValueError) as error:
        raise UsageError(f'--keras_weights={path} cannot be read as Keras weights '
                         f'({str(error).splitlines()[0]}).') from None
    if mismatch:
        raise UsageError(f'--keras_weights={path} holds weights of {architecture}: '
                         f'{mismatch}; pass the file of this --model_name.')
    try:
        keras_model.load_weights(path)
    except (OSError, KeyError, ValueError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UsageError(f'--keras_weights={path} does not load into {keras_model.name} '
                         f'({first}); pass the file of this --model_name.') from None
