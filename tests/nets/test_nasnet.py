"""NASNet and PNASNet: drop-path's schedule, the training-only auxiliary head, the
feature extractor, small builds of the large nets, and a short training run."""
import numpy as np
import pytest
import tensorflow as tf

from datasets import shapes
from nets import nets_factory
from nets.nasnet import cell_network, cells
from training.recipes import learning_rate as lr_config
from training.recipes import losses
from training.recipes import optimizers
from training.loop import trainer as trainer_lib

# A nasnet_cifar small enough to train in a test: 3 cells (one per stage) of 8 filters.
SMALL_CIFAR = dict(num_cells=3, num_conv_filters=8)


def _trace(net, shape, **call):
    out = {}
    tf.function(lambda x: out.setdefault('r', net(x, **call))).get_concrete_function(
        tf.TensorSpec(shape, tf.float32))
    return out['r']


class TestDropPathSchedule:

    def test_keep_probability_falls_with_depth_and_training_progress(self):
        # slim's 'v3': 1 - ratio * (1 - (1 - (depth + 1) / cells * (1 - keep))).
        keep, cells_in_net, total = 0.6, 20, 1000
        for depth in (0, 9, 19):
            by_depth = 1.0 - (depth + 1) / cells_in_net * (1.0 - keep)
            assert cell_network.drop_path_keep_prob(keep, depth, cells_in_net) == \
                pytest.approx(by_depth)
            for step, progress in ((0, 0.0), (250, 0.25), (1000, 1.0), (5000, 1.0)):
                expected = 1.0 - progress * (1.0 - by_depth)
                assert float(cell_network.drop_path_keep_prob(
                    keep, depth, cells_in_net, step, total)) == pytest.approx(expected)
        # The last cell at the end of training drops with the configured probability.
        assert float(cell_network.drop_path_keep_prob(keep, 19, 20, 1000, 1000)) == \
            pytest.approx(keep)

    def test_drop_path_zeroes_whole_examples_and_rescales_the_rest(self):
        inputs = tf.ones([400, 2, 2, 3])
        outputs = cells.drop_path(inputs, 0.75).numpy()
        per_example = outputs.reshape(400, -1)
        assert np.all(np.isclose(per_example, 0.0) | np.isclose(per_example, 1.0 / 0.75))
        assert np.all(per_example.min(1) == per_example.max(1))  # whole examples
        kept = (per_example[:, 0] > 0).mean()
        assert 0.6 < kept < 0.9  # 0.75 expected; 400 draws keep this for any seed

    def _net(self, **options):
        net = nets_factory.get_network_fn(
            'nasnet_cifar', 10, is_training=True, dropout_keep_prob=1.0,
            drop_path_keep_prob=0.5, total_training_steps=100, **SMALL_CIFAR, **options)
        return net

    def test_active_only_in_training_and_off_at_step_zero(self):
        net = self._net()
        images = tf.random.stateless_uniform([8, 32, 32, 3], seed=[1, 2], minval=-1)
        net(images, training=False)  # build

        def logits(training, step):
            return net(images, training=training, step=step)[0].numpy()

        # Inference: no drop-path whatever the step (batch norm uses moving statistics).
        np.testing.assert_array_equal(logits(False, 100), logits(False, 100))
        # Training at step 0: slim's schedule keeps every path, so it is deterministic.
        np.testing.assert_array_equal(logits(True, 0), logits(True, 0))
        # Training at the end of the schedule: paths dropped at random per example.
        assert not np.allclose(logits(True, 100), logits(True, 100))

    def test_no_drop_path_when_keep_probability_is_one(self):
        net = nets_factory.get_network_fn('nasnet_cifar', 10, is_training=True,
                                          drop_path_keep_prob=1.0, **SMALL_CIFAR)
        images = tf.random.stateless_uniform([4, 32, 32, 3], seed=[3, 4], minval=-1)
        np.testing.assert_array_equal(net(images, step=100)[0].numpy(),
                                      net(images, step=100)[0].numpy())

    @pytest.mark.slow  # a Trainer's run; the schedule itself is checked above
    def test_the_trainer_passes_its_step_to_the_net(self, tmp_path):
        net = self._net()
        seen_steps = []
        forward = net.forward

        def recording_forward(images, *, training, step=None, **rest):
            seen_steps.append((training, step))
            return forward(images, training=training, step=step, **rest)

        net.forward = recording_forward
        images, labels = shapes.generate(8, seed=0)
        trainer = _trainer(net, tmp_path, images, labels, max_steps=1)
        trainer.train()
        training_steps = [step for training, step in seen_steps if training]
        assert training_steps and all(step is not None for step in training_steps)


def _trainer(network, train_dir, images, labels, *, max_steps, learning_rate=0.05):
    images = images.astype(np.float32) / 127.5 - 1.0
    dataset = tf.data.Dataset.from_tensors((images, labels)).repeat()
    optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig(
        'momentum', momentum=0.9))
    lr_fn = lr_config.create_learning_rate_fn(
        lr_config.LearningRateConfig('fixed', learning_rate=learning_rate), 1000,
        len(labels))
    return trainer_lib.Trainer(
        strategy=tf.distribute.get_strategy(), network=network, optimizer=optimizer,
        learning_rate_fn=lr_fn, input_fn=lambda context: dataset,
        image_shape=images.shape[1:],
        config=trainer_lib.TrainConfig(train_dir=str(train_dir), batch_size=len(labels),
                                      max_number_of_steps=max_steps, log_every_n_steps=10))


@pytest.mark.slow
def test_nasnet_cifar_training_on_shapes_lowers_the_loss(tmp_path):
    # A small nasnet_cifar (3 cells of 8 filters, aux head and drop-path on) fits 32
    # shapes images. The loss is measured with batch statistics at step 0 (no
    # drop-path), so it reflects the weights, not the moving averages' warm-up.
    # Swept over seeds 0-19 (data and initialisation): after 30 momentum steps it was
    # at most 0.017x its initial value (5 to 8); asserted: < 0.1x.
    images, labels = shapes.generate(32, seed=0)
    network = nets_factory.get_network_fn(
        'nasnet_cifar', 10, is_training=True, drop_path_keep_prob=0.8,
        total_training_steps=30, **SMALL_CIFAR)
    trainer = _trainer(network, tmp_path, images, labels, max_steps=30)
    inputs = images.astype(np.float32) / 127.5 - 1.0

    def loss():
        logits, end_points = network(inputs, training=True, step=0)
        assert 'AuxLogits' in end_points
        return float(losses.softmax_cross_entropy(logits, labels, 0.0))

    initial = loss()
    trainer.train()
    assert loss() < 0.1 * initial


@pytest.mark.slow  # their golden logits, by variable name, stay in `make test`
@pytest.mark.parametrize('name', ['nasnet_large', 'pnasnet_large'])
def test_large_nets_built_small_have_slims_inference_variables(name, slim_nets):
    # Without the aux head (inference) no variable depends on the input size, so a
    # 96x96 trace creates exactly the full-size net's variables (the full-size zoo
    # checks run with `make test-slow` too).
    reference = slim_nets[name]['inference']
    net = nets_factory.get_network_fn(name, 1001)
    logits, end_points = _trace(net, [1, 96, 96, 3])
    assert sorted((v.name[:-2], v.shape.as_list()) for v in net.variables) == \
        sorted((n, s) for n, s, _ in reference['variables'])
    assert logits.shape == [1, 1001]
    assert set(end_points) == set(reference['end_points'])


# The cheapest in make test; the mobile builds in test-slow.
@pytest.mark.parametrize('name, end_point', [
    pytest.param('nasnet_mobile', 'Cell_3', marks=pytest.mark.slow),
    pytest.param('pnasnet_mobile', 'Cell_2', marks=pytest.mark.slow),
    ('nasnet_cifar', 'Stem')])
def test_base_stops_at_the_final_endpoint(name, end_point):
    net = nets_factory.get_network_fn(name, 10)
    features, end_points = net.base(tf.zeros([1, 64, 64, 3]), end_point)
    assert list(end_points)[-1] == end_point
    assert features is end_points[end_point]
    assert not any(v.name.startswith('final_layer/') for v in net.variables)
    with pytest.raises(ValueError, match='Unknown final endpoint'):
        nets_factory.get_network_fn(name, 10).base(tf.zeros([1, 64, 64, 3]), 'Cell_99')


def test_aux_head_only_in_training():
    images = tf.zeros([1, 96, 96, 3])  # the aux head's pooled map is 1x1
    inference = nets_factory.get_network_fn('nasnet_mobile', 5)
    _, end_points = inference(images)
    assert 'AuxLogits' not in end_points
    assert not any(v.name.startswith('aux_') for v in inference.variables)
    training = nets_factory.get_network_fn('nasnet_mobile', 5, is_training=True)
    _, end_points = training(images, step=0)
    assert end_points['AuxLogits'].shape == [1, 5]
    assert any(v.name.startswith('aux_7/aux_logits/FC/') for v in training.variables)
    with pytest.raises(ValueError, match='auxiliary head needs a larger'):
        nets_factory.get_network_fn('nasnet_mobile', 5, is_training=True)(
            tf.zeros([1, 64, 64, 3]), step=0)


def test_invalid_options_raise():
    with pytest.raises(ValueError, match='drop_path_keep_prob'):
        nets_factory.get_network_fn('nasnet_mobile', 5, drop_path_keep_prob=1.5)
    with pytest.raises(ValueError, match='dropout_keep_prob'):
        nets_factory.get_network_fn('nasnet_mobile', 5, dropout_keep_prob=0.0)
    with pytest.raises(TypeError, match='Unknown option'):
        nets_factory.get_network_fn('pnasnet_mobile', 5, depth_multiplier=0.5)
