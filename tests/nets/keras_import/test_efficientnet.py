"""Keras's EfficientNet and EfficientNetV2 applications, seeded random weights (batch-norm
statistics too) -> our nets through their mapping (nets/keras_import/efficientnet*.py):
the same logits within 1e-4 relative, the same parameter counts.

One test goes through the import job (keras_import_testing.check_import); the others
pair and copy with the engine directly, after setting Keras's batch-norm statistics to
a batch's (`_batch_statistics` says why): the job's check draws wholly random ones,
which the deeper variants do not survive in float32."""
import keras
import numpy as np
import pytest

from helpers import keras_import_testing
from nets.keras_import import catalog  # noqa: F401  (registers every counterpart)
from nets.keras_import import counterparts, transfer


def _batch_statistics(keras_model, sliced, image_size):
    """Batch norm's moving statistics set to those of a seeded batch holding the test's
    images (training mode, momentum 0, no dropout): seeded, different per channel and
    layer, so a statistic paired with the wrong variable shows. Left as drawn, they
    would not normalise: activations grow to 1e4 by efficientnet_v2_s's fifth stage,
    where each squeeze-excite sigmoid turns float32's relative rounding (1e-7) into
    that much absolute error of its gate, tripling the difference per block (measured:
    80 % of the logits). Moving them at random after the fact compounds through the
    layers the same way. Statistics of the batch keep activations near 1, as trained
    weights do."""
    norms = [layer for layer in keras_model.layers
             if isinstance(layer, keras.layers.BatchNormalization)]
    drops = [layer for layer in keras_model.layers if isinstance(layer, keras.layers.Dropout)]
    momenta, rates = [n.momentum for n in norms], [d.rate for d in drops]
    for layer in norms:
        layer.momentum = 0.0
    for layer in drops:
        layer.rate = 0.0
    # The test's images are this batch's first two (the same draws from the same seed).
    sliced(transfer.seeded_images(image_size, seed=0, batch=8), training=True)
    for layer, momentum in zip(norms, momenta):
        layer.momentum = momentum
    for layer, rate in zip(drops, rates):
        layer.rate = rate


def _import(model_name, image_size):
    """(our logits, Keras's, our parameters, Keras's less its preprocessing's)."""
    keras.utils.clear_session()  # Keras's automatic layer names ('normalization') restart
    counterpart = counterparts.get(model_name)
    keras_model = counterpart.build_keras(image_size)
    keras_import_testing.randomize_keras_weights(keras_model, seed=0)
    _batch_statistics(keras_model, transfer.keras_logits_model(counterpart, keras_model),
                      image_size)
    ours = transfer.build_ours(counterpart, image_size)
    imported = transfer.pair(counterpart, keras_model, ours)
    imported.copy()
    images = transfer.seeded_images(image_size)
    keras_logits = np.asarray(transfer.keras_logits_model(counterpart, keras_model)(images))
    our_logits = ours.network(images, training=False)[0].numpy()
    preprocessing = sum(np.prod(w.shape) for layer in transfer.preprocessing_layers(keras_model)
                        for w in layer.weights)
    our_count = sum(v.shape.num_elements() for v in ours.network.variables)
    return our_logits, keras_logits, our_count, keras_model.count_params() - preprocessing


def _check(model_name, image_size):
    ours, theirs, our_count, keras_count = _import(model_name, image_size)
    assert np.abs(ours - theirs).max() <= 1e-4 * np.abs(theirs).max()
    assert our_count == keras_count


# 67: odd maps on the way down (17, 9, 5, 3), where Keras's correct_pad must equal SAME.
@pytest.mark.parametrize('model_name, image_size', [
    ('efficientnet_b0', 64),
    pytest.param('efficientnet_b0', 67, marks=pytest.mark.slow),  # odd-sized maps
    pytest.param('efficientnet_v2_b0', 64, marks=pytest.mark.slow)])
def test_imports_keras_weights_with_equal_logits(model_name, image_size):
    _check(model_name, image_size)


@pytest.mark.slow
def test_the_import_job_gives_keras_logits(tmp_path, capsys):
    check = keras_import_testing.check_import('efficientnet_v2_b0', tmp_path, image_size=64,
                                               batch_statistics=True)
    assert check.our_parameters == 7_200_312 and check.unfilled == ()
    assert '--checkpoint_exclude_scopes=efficientnetv2-b0/head/dense.' in capsys.readouterr().out


@pytest.mark.slow
def test_a_second_model_in_one_process_imports(tmp_path, capsys):
    # Keras names the second model's preprocessing layers 'rescaling_1', ...: the engine
    # finds them by type. 64: at 32 the 1x1 maps make the net too sensitive to rounding.
    (tmp_path / 'first').mkdir(), (tmp_path / 'second').mkdir()
    keras_import_testing.check_import('efficientnet_b0', tmp_path / 'first', image_size=64,
                                      batch_statistics=True)
    check = keras_import_testing.check_import('efficientnet_b0', tmp_path / 'second',
                                              image_size=64, batch_statistics=True)
    assert check.our_parameters == 5_330_564 and check.relative_difference < 1e-4
    assert '--checkpoint_exclude_scopes=efficientnet-b0/head/dense.' in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize('model_name', [
    'efficientnet_b1', 'efficientnet_b2', 'efficientnet_b3', 'efficientnet_b4',
    'efficientnet_b5', 'efficientnet_b6', 'efficientnet_b7', 'efficientnet_v2_b1',
    'efficientnet_v2_b2', 'efficientnet_v2_b3', 'efficientnet_v2_s', 'efficientnet_v2_m',
    'efficientnet_v2_l'])
def test_imports_every_variant(model_name):
    # 96: the deepest nets' last stages keep 3x3 maps; on 1x1 maps batch statistics of
    # eight values leave near-constant channels that magnify rounding.
    _check(model_name, 96)
