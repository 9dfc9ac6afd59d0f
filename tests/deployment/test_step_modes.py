"""The replica step's modes are arguments: TensorBoard's capture and weight factoring
are switched on and off per call, with no thread-local or flag set on an object."""
import ast
import functools
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from deployment.aggregation import AllReduce
from deployment.weight_factors import Factored
from nets import nets_factory
from training.loop.model_step import ModelStep
from training.loop.train_config import TrainConfig
from training.recipes import optimizers

ROOT = pathlib.Path(__file__).resolve().parents[2]
PRODUCT = ('core', 'nets', 'datasets', 'preprocessing', 'deployment', 'training', 'export',
           'cli')


@pytest.fixture(scope='module')
def two_replica_step():
    strategy = tf.distribute.MirroredStrategy(
        ['/cpu:0', '/cpu:1'], cross_device_ops=tf.distribute.ReductionToOneDevice())
    with strategy.scope():
        network = nets_factory.get_network_fn('cifarnet', 10, weight_decay=0.004,
                                              is_training=True)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig('sgd'))
    model_step = ModelStep(
        strategy=strategy, network=network, optimizer=optimizer,
        learning_rate_fn=lambda step: 0.0, image_shape=(32, 32, 3),
        config=TrainConfig(train_dir='unused', batch_size=2), with_random_generator=True)
    return strategy, model_step


@pytest.mark.parametrize('capture, factor_weights',
                         [(False, False), (True, False), (False, True), (True, True)])
def test_capture_and_factors_are_switched_by_arguments_alone(two_replica_step, capture,
                                                              factor_weights):
    strategy, model_step = two_replica_step
    model_step.summary_capture.arm(0)  # the capture is due at step 0, if the step holds it
    for name in ('activations_step', 'gradients_step'):
        getattr(model_step.summary_capture, name).assign(-1)
    kinds = set()

    def replica_step(images, labels, *, capture, factor_weights):
        gradients, metrics, _ = model_step.replica_gradients(
            images, labels, model_step.global_step, capture=capture,
            factor_weights=factor_weights)
        kinds.update(type(g) for g in gradients)
        model_step.apply_gradients(
            AllReduce().aggregate(zip(gradients, model_step.train_variables)),
            metrics['learning_rate'], capture=capture)

    rng = np.random.default_rng(0)
    images = tf.constant(rng.uniform(-1, 1, (4, 32, 32, 3)), tf.float32)
    labels = tf.constant([1, 2, 3, 4], tf.int64)
    step = functools.partial(replica_step, capture=capture, factor_weights=factor_weights)
    dataset = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensors((images, labels)).unbatch().batch(4))
    batch = next(iter(dataset))
    tf.function(lambda x, y: strategy.run(step, args=(x, y)))(*batch)

    held = model_step.summary_capture.captured(strategy)
    assert (held['activations_step'] == 0) == capture
    assert (held['gradients_step'] == 0) == capture
    assert (Factored in kinds) == factor_weights


def _product_sources():
    for package in PRODUCT:
        yield from sorted((ROOT / package).rglob('*.py'))


def test_no_thread_local_carries_a_mode():
    found = []
    for path in _product_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == 'local' and isinstance(
                    node.value, ast.Name) and node.value.id == 'threading':
                found.append(f'{path.relative_to(ROOT)}:{node.lineno}')
    assert not found, f'threading.local in the product: {found}'
