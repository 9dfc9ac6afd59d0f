"""TF-Slim's nets that a Keras application equals, logit for logit.

Measured (tests/nets/keras_import/test_slim_nets.py): inception_v3,
inception_resnet_v2, mobilenet_v1 at the four widths, mobilenet_v2 (1.0, 1.4, 0.35),
mobilenet_v3 large and small (and their minimalistic variants), vgg_16 and vgg_19.
Keras creates their layers in slim's order, so `pairing.in_order` pairs them; what
differs is fixed by a transform of one weight:
- MobileNet v3: slim's squeeze-excite gate multiplies by 0.16667 where Keras's divides
  by 6, so the projection after each gate (linear, no bias) is divided by 6 * 0.16667.
- VGG: Keras's weights take BGR images (Caffe's order), slim's RGB: the first
  convolution's input channels are reversed.
Not equal, so not offered: NASNet (Keras zero-pads before the reduction cells' 3x3
stride-2 pools and pools 'valid'; slim pools 'SAME') and ResNet v2 (Keras zero-pads
by 1 before conv1's 3x3 stride-2 max pool, slim pools 'SAME': the pooled grid is
shifted by a pixel); see docs/training.md.
"""
import functools

import keras
import numpy as np

from core.naming import slim_name
from nets.keras_import import pairing
from nets.keras_import.counterparts import KerasCounterpart, Pair, register

_KERAS_WEIGHTS = 'https://storage.googleapis.com/tensorflow/keras-applications/'
# slim's squeeze-excite gate: relu6(x + 3) * 0.16667 (nets/mobilenet/conv_blocks.py).
_SLIM_GATE_SCALE = 0.16667


def _mobilenet_v3_pairs(keras_model, ours):
    pairs = pairing.in_order(keras_model, ours)
    gated = {slim_name(p.our_variable).rsplit('/squeeze_excite/', 1)[0]
             for p in pairs if '/squeeze_excite/' in slim_name(p.our_variable)}
    scale = 1.0 / (6.0 * _SLIM_GATE_SCALE)
    return [Pair(p.keras_variable, p.our_variable, lambda w: w * scale)
            if slim_name(p.our_variable).rsplit('/project/', 1)[0] in gated
            and slim_name(p.our_variable).endswith('/project/weights') else p
            for p in pairs]


def _vgg_pairs(keras_model, ours):
    pairs = pairing.in_order(keras_model, ours)
    first, rest = pairs[0], pairs[1:]
    assert pairing.our_role(first.our_variable) == 'weights'
    return [Pair(first.keras_variable, first.our_variable,
                 lambda w: np.ascontiguousarray(w[:, :, ::-1, :])), *rest]


def _register(model_name, application, url, pairs=None, **fields):
    """pairs: default, in creation order with our unfilled scopes left out."""
    pairs = pairs or functools.partial(pairing.in_order,
                                       unfilled_scopes=fields.get('unfilled_scopes', ()))
    register(KerasCounterpart(model_name=model_name, application=application,
                              imagenet_url=url, pairs=pairs, **fields))


_register('inception_v3', keras.applications.InceptionV3,
          _KERAS_WEIGHTS + 'inception_v3/inception_v3_weights_tf_dim_ordering_tf_kernels.h5',
          classifier_scope='InceptionV3/Logits',
          unfilled_scopes=('InceptionV3/AuxLogits/',), min_image_size=75)
_register('inception_resnet_v2', keras.applications.InceptionResNetV2,
          _KERAS_WEIGHTS + 'inception_resnet_v2/'
          'inception_resnet_v2_weights_tf_dim_ordering_tf_kernels.h5',
          classifier_scope='InceptionResnetV2/Logits',
          unfilled_scopes=('InceptionResnetV2/AuxLogits/',),
          min_image_size=139)  # slim's aux head needs a 5x5 map at Mixed_6a

for _name, _alpha, _text in [('mobilenet_v1', 1.0, '1_0'), ('mobilenet_v1_075', 0.75, '7_5'),
                             ('mobilenet_v1_050', 0.5, '5_0'),
                             ('mobilenet_v1_025', 0.25, '2_5')]:
    _register(_name, keras.applications.MobileNet,
              _KERAS_WEIGHTS + f'mobilenet/mobilenet_{_text}_224_tf.h5',
              classifier_scope='MobilenetV1/Logits',
              application_options={'alpha': _alpha})

for _name, _alpha in [('mobilenet_v2', 1.0), ('mobilenet_v2_140', 1.4),
                      ('mobilenet_v2_035', 0.35)]:
    _register(_name, keras.applications.MobileNetV2,
              _KERAS_WEIGHTS + 'mobilenet_v2/mobilenet_v2_weights_tf_dim_ordering_tf_kernels'
              f'_{_alpha}_224.h5', classifier_scope='MobilenetV2/Logits',
              application_options={'alpha': _alpha})

for _name, _application, _variant in [
        ('mobilenet_v3_large', keras.applications.MobileNetV3Large, 'large'),
        ('mobilenet_v3_small', keras.applications.MobileNetV3Small, 'small'),
        ('mobilenet_v3_large_minimalistic', keras.applications.MobileNetV3Large,
         'large_minimalistic'),
        ('mobilenet_v3_small_minimalistic', keras.applications.MobileNetV3Small,
         'small_minimalistic')]:
    _register(_name, _application,
              _KERAS_WEIGHTS + f'mobilenet_v3/weights_mobilenet_v3_{_variant}_224_1.0_float.h5',
              pairs=_mobilenet_v3_pairs, classifier_scope='MobilenetV3/Logits',
              # Keras's own Rescaling to [-1, 1] off: our net takes preprocessed images.
              application_options={'include_preprocessing': False,
                                   'minimalistic': _variant.endswith('minimalistic')})

for _name, _application, _file in [
        ('vgg_16', keras.applications.VGG16, 'vgg16/vgg16_weights_tf_dim_ordering_tf_kernels.h5'),
        ('vgg_19', keras.applications.VGG19, 'vgg19/vgg19_weights_tf_dim_ordering_tf_kernels.h5')]:
    # slim's fc6 is a 7x7 convolution over pool5: 224 pixels only.
    _register(_name, _application, _KERAS_WEIGHTS + _file, pairs=_vgg_pairs,
              classifier_scope=f'{_name}/fc8',
              keras_input_bgr=True, min_image_size=224)
