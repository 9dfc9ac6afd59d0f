"""TF-Slim's nets that equal a Keras application: Keras's seeded random weights (batch
norm's moving statistics too) -> the import job -> our logits equal Keras's, and the
parameter counts (the aux heads Keras lacks aside) are equal."""
import pytest

from helpers import keras_import_testing

# The smallest sizes both nets take (VGG's fc6 is a 7x7 convolution: 224 only).
FAST = [('mobilenet_v1_025', 32),
        pytest.param('mobilenet_v2_035', 32, marks=pytest.mark.slow),
        pytest.param('mobilenet_v3_small', 32, marks=pytest.mark.slow),
        pytest.param('inception_v3', 75, marks=pytest.mark.slow)]
SLOW = [('mobilenet_v1', 32), ('mobilenet_v1_075', 32), ('mobilenet_v1_050', 32),
        ('mobilenet_v2', 32), ('mobilenet_v2_140', 32), ('mobilenet_v3_large', 32),
        ('mobilenet_v3_large_minimalistic', 32), ('mobilenet_v3_small_minimalistic', 32),
        ('inception_resnet_v2', 139), ('vgg_16', 224), ('vgg_19', 224)]


@pytest.mark.parametrize('model_name, image_size', FAST)
def test_keras_weights_give_keras_logits(model_name, image_size, tmp_path):
    check = keras_import_testing.check_import(model_name, tmp_path, image_size)
    # Only inception_v3's aux head, which Keras lacks, keeps its initial values.
    assert bool(check.unfilled) == (model_name == 'inception_v3'), check.unfilled


@pytest.mark.slow
@pytest.mark.parametrize('model_name, image_size', SLOW)
def test_keras_weights_give_keras_logits_big_and_other_widths(model_name, image_size,
                                                               tmp_path):
    keras_import_testing.check_import(model_name, tmp_path, image_size)

