"""A Keras application's weights, imported and exported, serve Keras's logits: Keras's
application with seeded random weights (batch-norm statistics too) -> import_keras_weights.py
-> export_inference_graph.py (1,000 classes: --dataset_name=imagenet --labels_offset=1)
-> the SavedModel. `serving_preprocessed` on a seeded float batch gives the Keras
model's logits (its own preprocessing layers removed) within 1e-4 relative;
`serving_default` on seeded uint8 images of other sizes gives the family's evaluation
preprocessing followed by our net restored from the imported checkpoint. All at the
nets' default sizes, where the import script checks its logits. Measured: largest
logits 0.7-6, differences 5e-7 (serving_preprocessed) and 4e-7-4e-6 (serving_default)
relative.

efficientnet_b0 is in `make test`; convnext_tiny and efficientnet_v2_b0 are slow.
"""
import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import keras_import_testing
from helpers.scripts import EXPORT, run_script

from nets import nets_factory, registry
from nets.keras_import import catalog, transfer
from preprocessing import preprocessing_factory
from training.checkpoints import restore

IMPORT = 'import_keras_weights.py'
KERAS_CLASSES = 1000


def _check(result):
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert 'Traceback' not in result.stderr, result.stderr[-3000:]
    return result


def _largest_relative_difference(actual, expected):
    return float(np.abs(actual - expected).max() / np.abs(expected).max())


def _our_serving(model_name, imported, batch, image_size):
    """Our net restored from the imported checkpoint, on preprocessed images."""
    network = nets_factory.get_network_fn(model_name, KERAS_CLASSES)
    network.build((image_size, image_size, 3))
    restore.restore_network(network, str(imported))
    return network(batch, training=False)[0].numpy()


def _evaluation_preprocessing(model_name, images, image_size):
    """The family's evaluation preprocessing, image by image."""
    preprocess = preprocessing_factory.get_preprocessing(
        registry.get_spec(model_name).preprocessing_name, is_training=False)
    return tf.stack([preprocess(image, image_size, image_size) for image in images])


# At the nets' default sizes: the import script checks its logits there.
@pytest.mark.parametrize('model_name', [
    pytest.param('efficientnet_b0', marks=pytest.mark.slow),
    pytest.param('efficientnet_v2_b0', marks=pytest.mark.slow),
    pytest.param('convnext_tiny', marks=pytest.mark.slow),
])
def test_exported_imported_net_serves_keras_logits(tmp_path, model_name):
    keras.utils.clear_session()
    image_size = registry.get_spec(model_name).default_image_size
    counterpart = catalog.get(model_name)
    floats = transfer.seeded_images(image_size, seed=7, batch=3)
    pixels = tf.constant(np.random.default_rng(8).integers(
        0, 256, (3, image_size + 13, image_size + 5, 3)), tf.uint8)
    preprocessed = _evaluation_preprocessing(model_name, pixels, image_size)
    keras_model = keras_import_testing.randomize_keras_weights(
        counterpart.build_keras(image_size), seed=4)
    # Batch-norm statistics that normalise every input checked here (the import
    # script's seeded images, ours, the preprocessed pixels): random ones make a deep
    # squeeze-excite net magnify float32 rounding past any tolerance.
    keras_import_testing.set_batch_norm_statistics(counterpart, keras_model, np.concatenate(
        [transfer.seeded_images(image_size, 0), floats, preprocessed.numpy()]))
    weights, imported, export = (tmp_path / 'keras.weights.h5', tmp_path / 'imported',
                                 tmp_path / 'export')
    keras_model.save_weights(str(weights))
    _check(run_script(IMPORT, f'--model_name={model_name}', f'--keras_weights={weights}',
                      f'--output_dir={imported}'))
    _check(run_script(EXPORT, f'--model_name={model_name}', '--dataset_name=imagenet',
                      '--labels_offset=1', f'--checkpoint_path={imported}',
                      f'--export_dir={export}', '--export_format=saved_model',
                      '--num_parity_examples=4'))
    signatures = tf.saved_model.load(str(export / 'saved_model')).signatures

    keras_logits = np.asarray(transfer.keras_logits_model(counterpart, keras_model)(floats))
    served = signatures['serving_preprocessed'](images=tf.constant(floats))['logits'].numpy()
    assert served.shape == (3, KERAS_CLASSES)
    assert _largest_relative_difference(served, keras_logits) <= 1e-4

    served = signatures['serving_default'](images=pixels)['logits'].numpy()
    expected = _our_serving(model_name, imported, preprocessed, image_size)
    assert _largest_relative_difference(served, expected) <= 1e-4
