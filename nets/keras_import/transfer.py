"""The engine: a Keras application's weights into our net, checked tensor by tensor and
then by logits.

    keras_model = counterpart.build_keras(image_size)
    load_weights_file(keras_model, path)          # strict: one line naming a mismatch
    ours = build_ours(counterpart, image_size)
    transfer = pair(counterpart, keras_model, ours)
    transfer.copy()
    logits_agreement(counterpart, keras_model, ours.network, image_size)

The pairs come from the family's mapping (nets/keras_import/counterparts.py); `pair`
refuses a mapping that leaves a Keras weight out or uses it twice.
"""
import dataclasses
import os
from typing import List, Tuple

import numpy as np
import tensorflow as tf

from core.errors import UsageError
from core.naming import slim_name
from nets import nets_factory
from nets.keras_import import keras_files
from nets.keras_import.counterparts import KERAS_CLASSES, KerasCounterpart, Pair
from nets.network import Network

load_weights_file = keras_files.load_weights_file


@dataclasses.dataclass(frozen=True)
class OurNet:
    """Our net, built, and its variables in the order it created them."""
    network: Network
    variables: Tuple[tf.Variable, ...]


def build_ours(counterpart: KerasCounterpart, image_size: int) -> OurNet:
    """Our net with Keras's 1,000 classes, called once (in inference mode) so its
    variables exist; their creation order is recorded for the mapping."""
    network = nets_factory.get_network_fn(counterpart.model_name, KERAS_CLASSES,
                                          **counterpart.network_options)
    created = []

    def recording(next_creator, **kwargs):
        variable = next_creator(**kwargs)
        created.append(variable)
        return variable

    with tf.variable_creator_scope(recording):
        network(tf.zeros([1, image_size, image_size, 3]), training=False)
    known = {id(v) for v in network.variables}
    return OurNet(network, tuple(v for v in created if id(v) in known))


@dataclasses.dataclass
class Transfer:
    """The checked pairs, and what the restore report says about the rest."""
    pairs: List[Pair]
    unfilled: List[str]  # our variables Keras has none for (the counterpart's scopes)
    preprocessing: List[str]  # Keras weights of its preprocessing layers, not imported
    num_keras_weights: int

    def copy(self):
        for pair in self.pairs:
            value = np.asarray(pair.keras_variable.numpy())
            pair.our_variable.assign(pair.transform(value) if pair.transform else value)

    def report(self) -> str:
        """The restore report: every Keras tensor used once, our variables not filled."""
        reshaped = sum(pair.transform is not None for pair in self.pairs)
        lines = [f'Restore report: {len(self.pairs)} of {self.num_keras_weights} Keras '
                 f'tensors copied, each exactly once ({reshaped} transformed to our '
                 f'layout), none left over'
                 + (f'; {len(self.preprocessing)} tensors of Keras\'s preprocessing layers '
                    f'not imported (the net takes preprocessed images)' if self.preprocessing
                    else '')
                 + f'. {len(self.unfilled)} of our variables not filled'
                 + (' (they keep their initial values):' if self.unfilled else '.')]
        lines += [f'  {name}' for name in self.unfilled]
        return '\n'.join(lines)


def preprocessing_layers(keras_model) -> list:
    """Keras's own preprocessing: the Rescaling and Normalization layers before the
    first layer with weights of another kind (found by type and place, never by name:
    Keras numbers unnamed layers per process, 'rescaling_1' in a second model)."""
    import keras  # pylint: disable=import-outside-toplevel
    kinds = (keras.layers.Rescaling, keras.layers.Normalization)
    found = []
    for layer in keras_model.layers:
        if isinstance(layer, kinds):
            found.append(layer)
        elif layer.weights:
            break
    return found


def _preprocessing_weights(keras_model) -> list:
    return [w for layer in preprocessing_layers(keras_model) for w in layer.weights]


def _classifier_problems(counterpart: KerasCounterpart, pairs: List[Pair]) -> List[str]:
    """The declared classifier scope must hold exactly the filled variables whose last
    dimension is the 1,000 classes (a wider scope would drop more on fine-tuning)."""
    scope = counterpart.classifier_scope.rstrip('/') + '/'
    declared = sorted(slim_name(p.our_variable) for p in pairs
                      if slim_name(p.our_variable).startswith(scope))
    by_shape = sorted(slim_name(p.our_variable) for p in pairs
                      if tuple(p.our_variable.shape)[-1:] == (KERAS_CLASSES,))
    if declared and declared == by_shape:
        return []
    return [f'classifier_scope {counterpart.classifier_scope!r} holds {declared[:4]}, the '
            f'classifier is {by_shape[:4]}']


def pair(counterpart: KerasCounterpart, keras_model, ours: OurNet) -> Transfer:
    """The family's pairs, checked: every Keras weight (but its preprocessing layers')
    exactly once, each of ours at most once, shapes equal after the transform, and every
    variable of ours left over under the counterpart's unfilled scopes. A failed check
    is a bug of the mapping (ValueError naming it)."""
    pairs = list(counterpart.pairs(keras_model, ours))
    preprocessing = _preprocessing_weights(keras_model)
    skipped = {id(w) for w in preprocessing}
    expected = [w for w in keras_model.weights if id(w) not in skipped]
    used_keras = [id(p.keras_variable) for p in pairs]
    used_ours = [id(p.our_variable) for p in pairs]
    problems = []
    if sorted(used_keras) != sorted(id(w) for w in expected):
        left = [w.path for w in expected if id(w) not in used_keras]
        problems.append(f'Keras weights not used exactly once (left over: {left[:3]})')
    if len(set(used_ours)) != len(used_ours):
        problems.append('a variable of ours filled twice')
    for p in pairs:
        value_shape = np.shape((p.transform or (lambda a: a))(
            np.zeros(p.keras_variable.shape, np.float32)))
        if tuple(value_shape) != tuple(p.our_variable.shape):
            problems.append(f'{p.keras_variable.path} {value_shape} into '
                            f'{slim_name(p.our_variable)} {p.our_variable.shape}')
    unfilled = [slim_name(v) for v in ours.network.variables if id(v) not in used_ours]
    stray = [name for name in unfilled if not counterpart.is_unfilled(name)]
    if stray:
        problems.append(f'our variables not filled: {stray[:3]}')
    problems += _classifier_problems(counterpart, pairs)
    if problems:
        raise ValueError(f'The Keras mapping of {counterpart.model_name} is wrong: '
                         + '; '.join(problems))
    return Transfer(pairs, unfilled, [w.path for w in preprocessing],
                    len(keras_model.weights))


def keras_logits_model(counterpart: KerasCounterpart, keras_model):
    """The Keras model without its own preprocessing layers (from keras_input_layer on)."""
    if counterpart.keras_input_layer is None:
        return keras_model
    import keras  # pylint: disable=import-outside-toplevel
    return keras.Model(keras_model.get_layer(counterpart.keras_input_layer).input,
                       keras_model.output)


def seeded_images(image_size: int, seed: int = 0, batch: int = 2) -> np.ndarray:
    """Images in [-1, 1], the range of the inception-style preprocessing."""
    return np.random.default_rng(seed).uniform(
        -1, 1, (batch, image_size, image_size, 3)).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class LogitsAgreement:
    largest_difference: float
    largest_logit: float
    tolerance: float

    @property
    def relative(self) -> float:
        return self.largest_difference / max(self.largest_logit, 1e-30)

    @property
    def agrees(self) -> bool:
        return self.relative <= self.tolerance

    def describe(self) -> str:
        return (f'largest logit difference {self.largest_difference:.3g}, '
                f'{self.relative:.2g} of the largest logit {self.largest_logit:.3g} '
                f'(tolerance {self.tolerance:g})')


def logits_agreement(counterpart: KerasCounterpart, keras_model, network: Network,
                     image_size: int, seed: int = 0,
                     tolerance: float = 1e-4) -> LogitsAgreement:
    """Both nets' logits on seeded images (Keras's own preprocessing layers skipped; the
    channels reversed for a Keras model that takes BGR)."""
    images = seeded_images(image_size, seed)
    keras_images = images[..., ::-1].copy() if counterpart.keras_input_bgr else images
    theirs = np.asarray(keras_logits_model(counterpart, keras_model)(keras_images,
                                                                     training=False))
    ours = np.asarray(network(tf.constant(images), training=False)[0])
    if ours.shape != theirs.shape:
        raise ValueError(f'Logits of shape {ours.shape} against Keras\'s {theirs.shape}.')
    return LogitsAgreement(float(np.max(np.abs(ours - theirs))),
                           float(np.max(np.abs(theirs))), tolerance)


# Relative change of each input value: a few float32 units of the last place (2^-23).
_ROUNDING_STEP = 4 * 2.0 ** -23


def rounding_sensitivity(counterpart: KerasCounterpart, keras_model, image_size: int,
                         seed: int = 0) -> float:
    """How far the Keras model's own logits move, relative to the largest, when each
    input value moves by float32 rounding (a few units of the last place): a measure of
    how much rounding inside the net can change them. A healthy net gives ~1e-7; weights
    whose statistics do not normalise (random ones) give up to 1."""
    images = seeded_images(image_size, seed)
    if counterpart.keras_input_bgr:
        images = images[..., ::-1].copy()
    signs = np.random.default_rng(seed + 1).choice([-1.0, 1.0], images.shape)
    nudged = (images * (1 + _ROUNDING_STEP * signs)).astype(np.float32)
    model = keras_logits_model(counterpart, keras_model)
    before = np.asarray(model(images, training=False))
    after = np.asarray(model(nudged, training=False))
    return float(np.max(np.abs(after - before)) / max(np.max(np.abs(before)), 1e-30))


def keras_home() -> str:
    """Where Keras caches downloads (KERAS_HOME, else ~/.keras; /tmp/.keras when that
    cannot be written), as keras.utils.get_file chooses."""
    from keras.src.backend import config  # pylint: disable=import-outside-toplevel
    home = os.path.expanduser(config.keras_home())
    return home if os.access(home, os.W_OK) else os.path.join('/tmp', '.keras')


def imagenet_weights(counterpart: KerasCounterpart) -> str:
    """The path of the ImageNet weights file: the one in Keras's cache, else downloaded
    there; offline, a UsageError naming the file and where to put it."""
    import keras  # pylint: disable=import-outside-toplevel
    cache = os.path.join(keras_home(), 'models')
    path = os.path.join(cache, counterpart.imagenet_file)
    if os.path.exists(path):
        return path
    try:
        return keras.utils.get_file(counterpart.imagenet_file, counterpart.imagenet_url,
                                    cache_subdir='models')
    except Exception as error:  # pylint: disable=broad-except
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UsageError(f'Could not download {counterpart.imagenet_url} ({reason}); '
                         f'without a network, put that file at {path}, or pass '
                         f'--keras_weights=<its path>.') from None
