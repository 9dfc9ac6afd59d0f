"""The all-reduce of matmul weights' gradients as factors (deployment.weight_factors,
deployment.aggregation.AllReduce), on two replicas in this process (the test's two
logical CPUs): every replica gets the sum a whole-gradient all-reduce gives. The
cluster's case runs through the script in test_distributed_training.py."""
import numpy as np
import tensorflow as tf

from deployment.aggregation import AllReduce
from nets import nets_factory
from deployment.weight_factors import Factored
from training.recipes import optimizers
from training.loop.model_step import ModelStep
from training.loop.train_config import TrainConfig

BATCH = 4


def _aggregated_gradients(strategy, factor: bool, batches):
    """Each replica's aggregated gradients of cifarnet (weight decay on), for one batch
    per replica; and whether any gradient crossed as factors."""
    with strategy.scope():
        # A large weight decay: the factored weights' other term counts.
        network = nets_factory.get_network_fn('cifarnet', 10, weight_decay=0.5,
                                              is_training=True, dropout_keep_prob=1.0)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig('sgd'))
    model_step = ModelStep(
        strategy=strategy, network=network, optimizer=optimizer,
        learning_rate_fn=lambda step: 0.1, image_shape=(32, 32, 3),
        config=TrainConfig(train_dir='unused', batch_size=BATCH),
        with_random_generator=True)
    for variable in network.variables:
        rng = np.random.default_rng(sum(map(ord, variable.name)))
        variable.assign(0.05 * rng.standard_normal(variable.shape).astype(np.float32))
    aggregator, kinds = AllReduce(), set()

    def replica_fn(images, labels):
        gradients, _, _ = model_step.replica_gradients(
            images, labels, model_step.global_step, factor_weights=factor)
        kinds.update(type(g) for g in gradients)
        return [g for g, _ in aggregator.aggregate(zip(gradients,
                                                       model_step.train_variables))]

    def per_replica(item):
        return strategy.experimental_distribute_values_from_function(
            lambda context: batches[context.replica_id_in_sync_group][item])

    images, labels = per_replica(0), per_replica(1)
    results = tf.function(lambda x, y: strategy.run(replica_fn, args=(x, y)))(images, labels)
    # Per variable, each replica's aggregated gradient.
    return [[g.numpy() for g in strategy.experimental_local_results(result)]
            for result in results], Factored in kinds


def _batches(rows):
    rng = np.random.default_rng(7)
    return [(tf.constant(rng.uniform(-1, 1, (r, 32, 32, 3)), tf.float32),
             tf.constant(rng.integers(0, 10, r), tf.int64)) for r in rows]


def _two_replicas():
    # Reduced on one device: collective ops (the default here) of a later
    # MirroredStrategy in this process would reuse these ones' keys, with other shapes.
    return tf.distribute.MirroredStrategy(
        ['/cpu:0', '/cpu:1'], cross_device_ops=tf.distribute.ReductionToOneDevice())


def test_factored_weights_all_reduce_to_the_sum_of_whole_gradients():
    strategy, batches = _two_replicas(), _batches([BATCH, BATCH])
    whole, whole_factored = _aggregated_gradients(strategy, False, batches)
    factored, any_factored = _aggregated_gradients(strategy, True, batches)
    assert any_factored and not whole_factored
    for replicas_whole, replicas_factored in zip(whole, factored):
        np.testing.assert_array_equal(replicas_factored[0], replicas_factored[1])
        np.testing.assert_allclose(replicas_factored[0], replicas_whole[0],
                                   rtol=1e-5, atol=1e-6)


def test_a_short_batch_on_one_replica_fits_its_slot():
    strategy, batches = _two_replicas(), _batches([BATCH, 1])
    whole, _ = _aggregated_gradients(strategy, False, batches)
    factored, any_factored = _aggregated_gradients(strategy, True, batches)
    assert any_factored
    for replicas_whole, replicas_factored in zip(whole, factored):
        np.testing.assert_allclose(replicas_factored[1], replicas_whole[1],
                                   rtol=1e-5, atol=1e-6)
