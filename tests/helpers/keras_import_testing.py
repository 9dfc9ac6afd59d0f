"""The one test of a family's Keras mapping (nets/keras_import/): Keras's application
with seeded random weights -> the import job -> our net gives Keras's logits.

    keras_import_testing.check_import('mobilenet_v1', tmp_path, image_size=32)
"""
import dataclasses

import numpy as np

TOLERANCE = 1e-4  # largest logit difference, relative to the largest logit


def randomize_keras_weights(keras_model, seed: int = 0, skip_layers=()):
    """Seeded random values in every weight, batch-norm moving statistics included
    (means around 0, variances in [0.5, 1.5]), scaled by fan-in so that activations
    keep their size through a deep net. skip_layers (preprocessing) keep theirs."""
    rng = np.random.default_rng(seed)
    for layer in keras_model.layers:
        if layer.name in skip_layers:
            continue
        for weight in layer.weights:
            role, shape = weight.path.split('/')[-1], tuple(weight.shape)
            if role in ('gamma', 'moving_variance'):
                value = rng.uniform(0.5, 1.5, shape)
            elif len(shape) <= 1:  # bias, beta, moving_mean, layer scale
                value = rng.normal(0.0, 0.1, shape)
            else:
                depthwise = type(layer).__name__ == 'DepthwiseConv2D' or role == 'depthwise_kernel'
                fan_in = np.prod(shape[:-2]) * (1 if depthwise else shape[-2])
                value = rng.normal(0.0, np.sqrt(2.0 / fan_in), shape)
            weight.assign(value.astype(np.float32))
    return keras_model
