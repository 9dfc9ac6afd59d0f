"""Keras's ConvNeXt applications, seeded random weights -> our nets through their mapping
(nets/keras_import/convnext.py): the same logits within 1e-4 relative, the same
parameter counts, every Keras tensor used once."""
import keras
import numpy as np
import pytest

from helpers import keras_import_testing
from nets.keras_import import counterparts, transfer
from nets.keras_import import catalog  # noqa: F401  (registers every counterpart)


def _import(model_name, image_size):
    """(our logits, Keras's, our parameters, Keras's, the transfer)."""
    keras.utils.clear_session()
    counterpart = counterparts.get(model_name)
    keras_model = counterpart.build_keras(image_size)
    keras_import_testing.randomize_keras_weights(keras_model, seed=0)
    ours = transfer.build_ours(counterpart, image_size)
    imported = transfer.pair(counterpart, keras_model, ours)
    imported.copy()
    images = transfer.seeded_images(image_size)
    keras_logits = np.asarray(transfer.keras_logits_model(counterpart, keras_model)(images))
    our_logits = ours.network(images, training=False)[0].numpy()
    our_count = sum(v.shape.num_elements() for v in ours.network.variables)
    return our_logits, keras_logits, our_count, keras_model.count_params(), imported


def _check(model_name, image_size):
    ours, theirs, our_count, keras_count, imported = _import(model_name, image_size)
    assert np.abs(ours - theirs).max() <= 1e-4 * np.abs(theirs).max()
    assert our_count == keras_count
    assert not imported.unfilled and not imported.preprocessing
    return imported


def test_convnext_tiny_imports_keras_weights_with_equal_logits():
    imported = _check('convnext_tiny', 32)
    # Every weight of Keras's model paired: 4 stem + 3 x 4 downsampling + 18 x 9 blocks
    # + 4 head.
    assert len(imported.pairs) == imported.num_keras_weights == 4 + 12 + 18 * 9 + 4
    transposed = [p for p in imported.pairs if p.transform is not None]
    assert len(transposed) == 18  # the depthwise kernels, [7, 7, 1, c] -> [7, 7, c, 1]


def test_imagenet_file_is_the_one_keras_downloads():
    assert counterparts.get('convnext_base').imagenet_url == (
        'https://storage.googleapis.com/tensorflow/keras-applications/convnext/'
        'convnext_base.h5')


@pytest.mark.slow
@pytest.mark.parametrize('model_name', ['convnext_small', 'convnext_base', 'convnext_large',
                                        'convnext_xlarge'])
def test_imports_every_variant(model_name):
    _check(model_name, 32)
