"""The one test of a family's Keras mapping (nets/keras_import/): Keras's application
with seeded random weights -> the import job -> our net gives Keras's logits.

    keras_import_testing.check_import('mobilenet_v1', tmp_path, image_size=32)
"""
import dataclasses

import numpy as np

TOLERANCE = 1e-4  # largest logit difference, relative to the largest logit


def randomize_keras_weights(keras_model, seed: int = 0):
    """Seeded random values in every weight, batch-norm moving statistics included
    (means around 0, variances in [0.5, 1.5]), scaled by fan-in so that activations
    keep their size through a deep net. Keras's preprocessing layers keep theirs.

    Statistics drawn so do not normalise: a deep net with squeeze-excite grows its
    activations layer by layer and float32 rounding with them (see
    set_batch_norm_statistics, which the import check applies after this)."""
    from nets.keras_import import transfer  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(seed)
    skipped = {id(layer) for layer in transfer.preprocessing_layers(keras_model)}
    for layer in _all_layers(keras_model):
        if id(layer) in skipped or getattr(layer, 'layers', None):
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


def _all_layers(keras_model):
    """Every layer, nested Sequentials' (ConvNeXt's stem) included."""
    for layer in keras_model.layers:
        yield layer
        if getattr(layer, 'layers', None):
            yield from _all_layers(layer)


def set_batch_norm_statistics(counterpart, keras_model, images):
    """Every batch norm's moving statistics set from a forward pass of `images`, layer
    by layer in inference mode: each layer takes, on its way, the per-channel mean m of
    its input and the second moment about zero (variance + m^2) as its variance, then
    normalises with them -- so what inference computes later is this very pass.

    Seeded and different per channel and layer (a statistic paired with the wrong
    variable shows), and they keep activations near 1, as trained weights do. Drawn at
    random they do not: efficientnet_v2_s's activations reach 1e3-1e4 and each
    squeeze-excite gate turns float32 rounding into gate error, x3 per block (43 % of
    the largest logit at 64). Measured with these statistics: b0 at 64 1e-5, v2_s at
    64 6e-5, but b7 at 64 5e-4 and every EfficientNet at 32 (1x1 maps) over 1e-4,
    where Keras's own logits move as much under float32 rounding of the input (the
    batch's plain variance does no better: b7 at 32 5e-2)."""
    import keras  # pylint: disable=import-outside-toplevel
    from keras import ops  # pylint: disable=import-outside-toplevel

    from nets.keras_import import transfer  # pylint: disable=import-outside-toplevel
    norms = [layer for layer in _all_layers(keras_model)
             if isinstance(layer, keras.layers.BatchNormalization)]
    if not norms:
        return keras_model

    def calibrating(norm):
        original = norm.call

        def call(inputs, training=None, mask=None):
            del training
            axes = [a for a in range(len(inputs.shape)) if a != norm.axis % len(inputs.shape)]
            mean = ops.mean(inputs, axis=axes)
            norm.moving_mean.assign(mean)
            norm.moving_variance.assign(ops.mean(ops.square(inputs), axis=axes))
            return original(inputs, training=False, mask=mask)
        return call

    for norm in norms:
        norm.call = calibrating(norm)
    try:
        transfer.keras_logits_model(counterpart, keras_model)(images, training=False)
    finally:
        for norm in norms:
            del norm.call
    return keras_model


@dataclasses.dataclass(frozen=True)
class ImportCheck:
    relative_difference: float
    our_parameters: int  # outside the counterpart's unfilled scopes
    keras_parameters: int  # outside its preprocessing layers
    unfilled: tuple


def _count(variables) -> int:
    return int(sum(np.prod(v.shape) for v in variables))


def check_import(model_name: str, tmp_path, image_size: int, seed: int = 0,
                 batch_statistics: bool = False) -> ImportCheck:
    """Keras's application (seeded random weights) saved to a .weights.h5 -> the import
    job -> our net restored from its output: logits equal within TOLERANCE (relative to
    the largest) on a seeded batch, parameter counts equal.

    batch_statistics: batch norm's statistics from a forward pass
    (set_batch_norm_statistics), for deep nets with squeeze-excite (EfficientNet),
    which random ones make too sensitive to float32 rounding. Not for nets checked at
    1x1 maps (the slim nets at 32): statistics of a few images' single values make
    them as sensitive the other way (mobilenet_v2_035 at 32: 5e-4)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from cli import import_weights_job  # pylint: disable=import-outside-toplevel
    from core.naming import slim_name  # pylint: disable=import-outside-toplevel
    from nets import nets_factory  # pylint: disable=import-outside-toplevel
    from nets.keras_import import catalog, transfer  # pylint: disable=import-outside-toplevel
    from training.checkpoints import restore

    counterpart = catalog.get(model_name)
    keras_model = counterpart.build_keras(image_size)
    randomize_keras_weights(keras_model, seed)
    # The statistics' batch holds both checks' images (the job's, seed + 1, and the
    # restored net's, seed + 2): on 1x1 maps (a deep net at 32) a channel's statistics
    # come from the batch's few values alone, and an image outside it lands far off
    # them, compounding per layer (b0 at 32: logits 1e3 against the batch's 3).
    if batch_statistics:
        set_batch_norm_statistics(counterpart, keras_model, np.concatenate(
            [transfer.seeded_images(image_size, s) for s in (seed + 1, seed + 2, seed + 3)]))
    weights = str(tmp_path / 'keras.weights.h5')
    keras_model.save_weights(weights)
    output = str(tmp_path / 'imported')
    imported = import_weights_job.run(import_weights_job.ImportJob(
        model_name, weights, output, check_image_size=image_size, seed=seed + 1))

    network = nets_factory.get_network_fn(model_name, 1000, **counterpart.network_options)
    images = transfer.seeded_images(image_size, seed + 2)
    network(tf.constant(images[:1]), training=False)
    plan = restore.plan_restore(network, output)
    assert [n for n in plan.missing if not counterpart.is_unfilled(n)] == []
    assert not plan.mismatched and not plan.checkpoint_only
    restore.restore_network(network, output, ignore_missing_vars=True)
    agreement = transfer.logits_agreement(counterpart, keras_model, network, image_size,
                                          seed=seed + 2, tolerance=TOLERANCE)
    assert agreement.agrees, agreement.describe()
    preprocessing = {id(w) for layer in transfer.preprocessing_layers(keras_model)
                     for w in layer.weights}
    check = ImportCheck(
        agreement.relative,
        _count(v for v in network.variables if not counterpart.is_unfilled(slim_name(v))),
        _count(w for w in keras_model.weights if id(w) not in preprocessing),
        tuple(sorted(imported.unfilled)))  # the job's: our variables Keras has none for
    assert check.our_parameters == check.keras_parameters, check
    return check
