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


@dataclasses.dataclass(frozen=True)
class ImportCheck:
    relative_difference: float
    our_parameters: int  # outside the counterpart's unfilled scopes
    keras_parameters: int  # outside its preprocessing layers
    unfilled: tuple


def _count(variables) -> int:
    return int(sum(np.prod(v.shape) for v in variables))


def check_import(model_name: str, tmp_path, image_size: int, seed: int = 0) -> ImportCheck:
    """Keras's application (seeded random weights) saved to a .weights.h5 -> the import
    job -> our net restored from its output: logits equal within TOLERANCE (relative to
    the largest) on a seeded batch, parameter counts equal."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from cli import import_weights_job  # pylint: disable=import-outside-toplevel
    from core.naming import slim_name  # pylint: disable=import-outside-toplevel
    from nets import nets_factory  # pylint: disable=import-outside-toplevel
    from nets.keras_import import catalog, transfer  # pylint: disable=import-outside-toplevel
    from training import checkpoints  # pylint: disable=import-outside-toplevel

    counterpart = catalog.get(model_name)
    keras_model = counterpart.build_keras(image_size)
    randomize_keras_weights(keras_model, seed, counterpart.preprocessing_layers)
    weights = str(tmp_path / 'keras.weights.h5')
    keras_model.save_weights(weights)
    output = str(tmp_path / 'imported')
    import_weights_job.run(import_weights_job.ImportJob(
        model_name, weights, output, check_image_size=image_size, seed=seed + 1))

    network = nets_factory.get_network_fn(model_name, 1000, **counterpart.network_options)
    images = transfer.seeded_images(image_size, seed + 2)
    network(tf.constant(images[:1]), training=False)
    plan = checkpoints.plan_restore(network, output)
    assert [n for n in plan.missing if not counterpart.is_unfilled(n)] == []
    assert not plan.mismatched and not plan.checkpoint_only
    checkpoints.restore_network(network, output, ignore_missing_vars=True)
    agreement = transfer.logits_agreement(counterpart, keras_model, network, image_size,
                                          seed=seed + 2, tolerance=TOLERANCE)
    assert agreement.agrees, agreement.describe()
    preprocessing = {id(w) for name in counterpart.preprocessing_layers
                     for w in keras_model.get_layer(name).weights}
    check = ImportCheck(
        agreement.relative,
        _count(v for v in network.variables if not counterpart.is_unfilled(slim_name(v))),
        _count(w for w in keras_model.weights if id(w) not in preprocessing),
        tuple(sorted(plan.missing)))
    assert check.our_parameters == check.keras_parameters, check
    return check
