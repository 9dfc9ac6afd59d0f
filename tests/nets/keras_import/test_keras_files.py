"""Keras weights files read strictly (nets/keras_import/keras_files.py), here a model with
nested Sequentials: ConvNeXt's stem and downsampling layers, which Keras 3's
.weights.h5 stores under 'layers/sequential/layers/conv2d/vars/0'."""
import shutil

import h5py
import keras
import numpy as np
import pytest

from core.errors import UsageError
from nets.keras_import import catalog, keras_files

_STEM_KERNEL = 'layers/sequential/layers/conv2d/vars/0'


@pytest.fixture(scope='module')
def convnext_files(tmp_path_factory):
    """What a user has: Keras's own ConvNeXtTiny (its preprocessing included) saved in
    both formats, at 32 pixels."""
    from keras.src.legacy.saving import legacy_h5_format
    directory = tmp_path_factory.mktemp('convnext_weights')
    keras.utils.set_random_seed(0)
    model = keras.applications.ConvNeXtTiny(weights=None, input_shape=(32, 32, 3))
    model.save_weights(str(directory / 'convnext_tiny.weights.h5'))
    with h5py.File(directory / 'convnext_tiny.h5', 'w') as file:
        legacy_h5_format.save_weights_to_hdf5_group(file, model)
    return directory


@pytest.fixture(scope='module')
def convnext_tiny():
    """The job's model (built without Keras's preprocessing)."""
    return catalog.get('convnext_tiny').build_keras(32)


@pytest.mark.parametrize('file_name', ['convnext_tiny.weights.h5', 'convnext_tiny.h5'])
def test_nested_sequentials_load_in_both_formats(convnext_files, convnext_tiny, file_name):
    path = str(convnext_files / file_name)
    assert keras_files.first_mismatch(convnext_tiny, path) is None
    keras_files.load_weights_file(convnext_tiny, path)
    with h5py.File(convnext_files / 'convnext_tiny.weights.h5', 'r') as file:
        stored = file[_STEM_KERNEL][...]
    stem_conv = convnext_tiny.get_layer('convnext_tiny_stem').layers[0]
    assert stored.shape == (4, 4, 3, 96)
    np.testing.assert_array_equal(stem_conv.kernel.numpy(), stored)


def test_a_misfit_inside_a_nested_sequential_is_named(convnext_files, convnext_tiny,
                                                      tmp_path):
    wrong = tmp_path / 'wrong.weights.h5'
    shutil.copy(convnext_files / 'convnext_tiny.weights.h5', wrong)
    with h5py.File(wrong, 'r+') as file:
        del file[_STEM_KERNEL]
        file[_STEM_KERNEL] = np.zeros([4, 4, 3, 128], np.float32)
    with pytest.raises(UsageError, match=_STEM_KERNEL + r' \(convnext_tiny_stem/convnext_tiny_stem_conv/kernel\)'
                       r' has shape \(4, 4, 3, 128\), the model\'s \(4, 4, 3, 96\)'):
        keras_files.load_weights_file(convnext_tiny, str(wrong))
