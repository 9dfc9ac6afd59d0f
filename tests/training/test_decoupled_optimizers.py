"""adamw, lamb, lion and muon step for step with Keras 3's optimizers, lars with Model
Garden's rule re-derived in numpy: five steps on lenet and cifarnet, L2 and decoupled
decay on, the default mask (biases undecayed), global-norm clipping on and off; every
variable and slot within 1e-5 of the reference (relative to the variable's largest
magnitude). Then the same update on 2 clones, a checkpoint that resumes exactly, and
(slow) under parameter servers: the slots on the ps task, an exact resume."""
import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils

from core.errors import UsageError
from core.naming import slim_name
from deployment import aggregation
from nets import nets_factory
from training.recipes import losses, weight_decay_masks
from training.recipes.optimizers import DECOUPLED_NAMES, OptimizerConfig, create_optimizer

STEPS = 5
BATCH = 2
CLIP = 0.05  # below the nets' first gradient norms: clipping acts
# Each optimizer's flags (decay on, some hyper-parameters off their defaults) and
# learning rates of the size its step needs, changing per step as a schedule's do.
CONFIGS = {
    'adamw': (dict(adamw_weight_decay=0.1, adamw_beta_1=0.8, adamw_epsilon=1e-6), 1e-3),
    'lamb': (dict(lamb_weight_decay=0.1, lamb_beta_2=0.99), 1e-3),
    'lion': (dict(lion_weight_decay=0.5, lion_beta_1=0.8), 1e-4),
    'lars': (dict(lars_weight_decay_rate=1e-3, lars_eeta=0.01), 0.5),
    'muon': (dict(muon_weight_decay=0.1, muon_adam_weight_decay=0.05, muon_momentum=0.9,
                  muon_adam_lr_ratio=0.5), 1e-3),
}
RATE_FACTORS = (1.0, 0.5, 1.0, 0.2, 0.8)
# The nets' first fully connected layers (3136 x 1024, 4096 x 384) would cost Muon
# seconds of Newton-Schulz: they take AdamW's step by name (muon's exclude_layers, which
# needs testing too); the smaller 2-D layers take Muon's.
MUON_EXCLUDE = 'fc3'


def keras_reference(name, hyper, learning_rate, clip, exclude_layers):
    """(optimizer, slots_of(var)) of Keras 3 set up as our flags say."""
    common = dict(learning_rate=learning_rate, global_clipnorm=clip or None)
    if name == 'adamw':
        optimizer = keras.optimizers.AdamW(
            weight_decay=hyper['weight_decay'], beta_1=hyper['beta_1'],
            beta_2=hyper['beta_2'], epsilon=hyper['epsilon'], **common)
        return optimizer, lambda i: [optimizer._momentums[i], optimizer._velocities[i]]
    if name == 'lamb':
        optimizer = keras.optimizers.Lamb(
            weight_decay=hyper['weight_decay'], beta_1=hyper['beta_1'],
            beta_2=hyper['beta_2'], epsilon=hyper['epsilon'], **common)
        return optimizer, lambda i: [optimizer._momentums[i], optimizer._velocities[i]]
    if name == 'lion':
        optimizer = keras.optimizers.Lion(weight_decay=hyper['weight_decay'],
                                          beta_1=hyper['beta_1'], beta_2=hyper['beta_2'],
                                          **common)
        return optimizer, lambda i: [optimizer._momentums[i]]
    optimizer = keras.optimizers.Muon(
        weight_decay=hyper['weight_decay'], adam_weight_decay=hyper['adam_weight_decay'],
        adam_beta_1=hyper['adam_beta_1'], adam_beta_2=hyper['adam_beta_2'],
        epsilon=hyper['epsilon'], momentum=hyper['momentum'], ns_steps=hyper['ns_steps'],
        nesterov=hyper['nesterov'], muon_a=hyper['a'], muon_b=hyper['b'],
        muon_c=hyper['c'], rms_rate=hyper['rms_rate'], adam_lr_ratio=hyper['adam_lr_ratio'],
        exclude_layers=[exclude_layers] if exclude_layers else None,
        exclude_embeddings=hyper['exclude_embeddings'], **common)
    return optimizer, lambda i: [slot for slot in (optimizer.momentums[i],
                                                  optimizer.adam_velocities[i])
                                 if slot is not None]


class NumpyLars:
    """Model Garden's LARS (official/modeling/optimization/lars.py), in float64."""

    def __init__(self, hyper, clip, excluded):
        self.hyper, self.clip, self.excluded = hyper, clip, excluded
        self.learning_rate = None
        self.momenta = {}

    def apply_gradients(self, grads_and_vars):
        pairs = [(g.numpy().astype(np.float64), v) for g, v in grads_and_vars]
        if self.clip:
            norm = np.sqrt(sum(np.sum(g**2) for g, _ in pairs))
            pairs = [(g * self.clip * min(1 / norm, 1 / self.clip), v) for g, v in pairs]
        h = self.hyper
        for grad, var in pairs:
            param = var.numpy().astype(np.float64)
            adapt = slim_name(var) not in self.excluded
            if adapt and h['weight_decay_rate']:
                grad = grad + h['weight_decay_rate'] * param
            w_norm, g_norm = np.linalg.norm(param), np.linalg.norm(grad)
            trust = h['eeta'] * w_norm / g_norm if adapt and w_norm > 0 and g_norm > 0 else 1
            momentum = self.momenta.get(slim_name(var), np.zeros_like(param))
            self.momenta[slim_name(var)] = h['momentum'] * momentum + (
                self.learning_rate * trust * grad)
            var.assign(param - self.momenta[slim_name(var)])

    def slots(self, var):
        return [self.momenta[slim_name(var)]]


def build_net(model_name, seed):
    tf.random.set_seed(seed)
    network = nets_factory.get_network_fn(model_name, 10, weight_decay=4e-5,
                                          is_training=True)
    network.build(network_image_shape(model_name))
    return network


def network_image_shape(model_name):
    return (28, 28, 1) if model_name == 'lenet' else (32, 32, 3)


def gradients(network, images, labels):
    with tf.GradientTape() as tape:
        logits, end_points = network(images, training=False)  # no dropout: deterministic
        loss = tf.add_n(list(losses.compute_losses(logits, end_points, labels, network,
                                                   0.0).values()))
    return tape.gradient(loss, network.trainable_variables)


def relative_error(ours, reference):
    ours, reference = np.asarray(ours, np.float64), np.asarray(reference, np.float64)
    return np.max(np.abs(ours - reference)) / max(np.max(np.abs(reference)), 1e-30)


def cases():
    """Each optimizer on both nets, clipping on one and off on the other (which one
    alternates over the optimizers: both nets see both). Lenet's cases, 2-3 s each
    (its 3.2 M-weight layer), run in test-slow."""
    for index, name in enumerate(DECOUPLED_NAMES):
        for model_name in ('lenet', 'cifarnet'):
            clipped = (model_name == 'lenet') == (index % 2 == 0)
            yield pytest.param(
                name, model_name, clipped,
                id=f'{name}-{model_name}-{"clipped" if clipped else "unclipped"}',
                marks=[pytest.mark.slow] if model_name == 'lenet' else [])


@pytest.mark.parametrize('name, model_name, clipped', cases())
def test_five_steps_equal_the_reference(name, model_name, clipped):
    flags, base_rate = CONFIGS[name]
    if name == 'muon':
        flags = dict(flags, muon_exclude_layers=MUON_EXCLUDE)
    network = build_net(model_name, 1)
    ours = network.trainable_variables
    # The reference's copies; both take the gradients at our weights (the update rules
    # are what is compared).
    theirs = [tf.Variable(v, name=slim_name(v)) for v in ours]
    for var in theirs:
        var.path = slim_name(var)  # Keras's Muon tells layers by path
    biases = {slim_name(v) for v in ours if slim_name(v).endswith('/biases')}
    rng = np.random.default_rng(0)
    images = tf.constant(rng.normal(size=(BATCH, *network_image_shape(model_name))),
                         tf.float32)
    labels = tf.constant([3, 7])
    first = gradients(network, images, labels)
    clip = 0.5 * float(tf.linalg.global_norm(first)) if clipped else 0.0
    config = OptimizerConfig(optimizer=name, clip_gradient_norm=clip, **flags)
    optimizer = create_optimizer(config)
    optimizer.build(ours)
    assert optimizer.decay_counts() == (len(ours) - len(biases), len(biases))
    if name == 'lars':
        reference = NumpyLars(config.hyperparameters('lars'), clip, biases)
        slots_of = reference.slots
    else:
        reference, slot_lists = keras_reference(name, config.hyperparameters(name),
                                                base_rate, clip,
                                                flags.get('muon_exclude_layers'))
        reference.exclude_from_weight_decay(
            var_list=[v for v in theirs if slim_name(v) in biases])
        reference.build(theirs)

        def slots_of(var):
            return [slot.numpy() for slot in slot_lists(reference._get_variable_index(var))]
    norms = []
    for step in range(STEPS):
        rate = base_rate * RATE_FACTORS[step]
        grads = first if step == 0 else gradients(network, images, labels)
        norms.append(optimizer.apply_gradients(zip(grads, ours), rate))
        reference.learning_rate = rate
        reference.apply_gradients(zip(grads, theirs))
    if clipped:
        assert float(norms[0]) > clip  # clipping acted
    errors = {}
    for mine, other in zip(ours, theirs):
        errors[slim_name(mine)] = relative_error(mine.numpy(), other.numpy())
        my_slots = list(optimizer._slots[slim_name(mine)].values())
        other_slots = slots_of(other)
        assert len(my_slots) == len(other_slots), slim_name(mine)
        for index, (my_slot, other_slot) in enumerate(zip(my_slots, other_slots)):
            errors[f'{slim_name(mine)} slot {index}'] = relative_error(my_slot.numpy(),
                                                                       other_slot)
    worst = max(errors.items(), key=lambda item: item[1])
    assert worst[1] <= 1e-5, worst


# What the five-step comparison does not cover: the mask's categories, mistakes, clones,
# checkpoints.

@pytest.mark.parametrize('name, category', [
    ('CifarNet/conv1/weights', None), ('CifarNet/conv1/biases', 'biases'),
    ('resnet_v1_50/conv1/BatchNorm/gamma', 'norms'),
    ('convnext_tiny/stage_0/block_0/layer_norm/beta', 'norms'),
    ('convnext_tiny/stage_0/block_0/layer_scale', 'layer_scales'),
    ('dinov2_small_14/block_3/layer_scale_2', 'layer_scales'),
    ('vit_b16/position_embedding', 'embeddings'), ('vit_b16/class_token', 'embeddings'),
    ('vit_b16/register_tokens', 'embeddings'), ('vit_b16/patch_embedding/conv/weights', None),
    ('LeNet/fc3/biases/part_1', 'biases'),
])
def test_mask_categories(name, category):
    assert weight_decay_masks.category_of(name) == category


def test_mask_flag_mistakes_end_in_one_line():
    assert weight_decay_masks.parse_exclude('none') == ()
    with pytest.raises(UsageError, match='--weight_decay_exclude=norm,biases names norm'):
        weight_decay_masks.parse_exclude('norm,biases')
    lenet = build_net('lenet', 1).trainable_variables
    weight_decay_masks.DecayMask.from_flag(None).check_matches(lenet)  # default: fine
    with pytest.raises(UsageError, match='names norms, embeddings, which match no'):
        weight_decay_masks.DecayMask.from_flag('norms,biases,embeddings').check_matches(lenet)


@pytest.mark.parametrize('flags, message', [
    (dict(optimizer='adam', adamw_weight_decay=0.05), '--adamw_weight_decay is a hyper-'
                                                     'parameter of --optimizer=adamw'),
    (dict(optimizer='lamb', lion_beta_2=0.9), '--lion_beta_2 .* --optimizer=lion'),
    (dict(optimizer='momentum', weight_decay_exclude='biases'), 'has none: drop it'),
    (dict(optimizer='lion', lion_beta_1=0.0), '--lion_beta_1'),
])
def test_an_optimizers_flag_given_to_another_is_refused(flags, message):
    with pytest.raises(UsageError, match=message):
        OptimizerConfig(**flags)


SMALL = {'Net/fc/weights': np.arange(12, dtype=np.float32).reshape(4, 3) / 10 - 0.5,
         'Net/fc/biases': np.array([0.1, -0.2, 0.3], np.float32),
         'Net/conv/weights': np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 2, 2, 3)}


def small_gradient(step, name):
    return np.cos(np.arange(SMALL[name].size) + 3 * step).reshape(SMALL[name].shape)


@pytest.mark.parametrize('name', DECOUPLED_NAMES)
def test_two_clones_update_as_one_device(name):
    flags = dict(CONFIGS[name][0], clip_gradient_norm=1.0)
    one_device = {key: tf.Variable(value, name=key) for key, value in SMALL.items()}
    single = create_optimizer(OptimizerConfig(optimizer=name, **flags))
    single.build(one_device.values())
    # Not collective all-reduces: their instance keys restart with each strategy, and
    # another test's strategy in this process would pair with shapes of its own.
    strategy = tf.distribute.MirroredStrategy(
        ['/cpu:0', '/cpu:1'], cross_device_ops=tf.distribute.ReductionToOneDevice())
    with strategy.scope():
        mirrored = {key: tf.Variable(value, name=key) for key, value in SMALL.items()}
        optimizer = create_optimizer(OptimizerConfig(optimizer=name, **flags))
        optimizer.build(mirrored.values())

    @tf.function
    def clone_step(step, rate):
        def replica_fn():  # each replica holds half the gradient; the update their sum
            pairs = [(tf.constant(small_gradient(0, key), tf.float32)
                      * tf.cast(step + 1, tf.float32) / 2, var)
                     for key, var in mirrored.items()]
            optimizer.apply_gradients(aggregation.AllReduce().aggregate(pairs), rate)
        strategy.run(replica_fn)

    rate = CONFIGS[name][1]
    for step in range(3):
        clone_step(tf.constant(step), tf.constant(rate))
        single.apply_gradients([(small_gradient(0, key).astype(np.float32) * (step + 1), var)
                                for key, var in one_device.items()], rate)
    for key, var in mirrored.items():
        copies = [copy.numpy() for copy in var.values]
        np.testing.assert_array_equal(copies[0], copies[1])
        np.testing.assert_allclose(copies[0], one_device[key].numpy(), rtol=1e-5, atol=1e-7)
        for slot in optimizer._slots[key].values():
            slot_copies = [copy.numpy() for copy in slot.values]
            np.testing.assert_array_equal(slot_copies[0], slot_copies[1])
    assert [int(v.numpy()) for v in optimizer.iterations.values] == [3, 3]


@pytest.mark.parametrize('name', DECOUPLED_NAMES)
def test_checkpoint_resumes_exactly(name, tmp_path):
    def make():
        variables = {key: tf.Variable(value, name=key) for key, value in SMALL.items()}
        optimizer = create_optimizer(OptimizerConfig(optimizer=name, **CONFIGS[name][0]))
        optimizer.build(variables.values())
        return variables, optimizer

    def train(variables, optimizer, steps):
        for step in steps:
            optimizer.apply_gradients(
                [(small_gradient(step, key), var) for key, var in variables.items()],
                CONFIGS[name][1])

    variables, optimizer = make()
    train(variables, optimizer, [0, 1])
    path = tf.train.Checkpoint(optimizer=optimizer, **{
        key.replace('/', '.'): var for key, var in variables.items()}).save(
        str(tmp_path / 'ckpt'))
    restored, restored_optimizer = make()
    tf.train.Checkpoint(optimizer=restored_optimizer, **{
        key.replace('/', '.'): var for key, var in restored.items()}).restore(
        path).assert_consumed()
    train(variables, optimizer, [2, 3])
    train(restored, restored_optimizer, [2, 3])
    for key in SMALL:
        np.testing.assert_array_equal(variables[key].numpy(), restored[key].numpy())
    assert int(restored_optimizer.iterations.numpy()) == 4


@pytest.mark.parametrize('name, expected', [
    ('adamw', 'decoupled 0.1 x learning rate on 2 variables (1 excluded: biases)'),
    ('muon', 'decoupled 0.05 / 0.1 x learning rate on 2 variables (1 excluded: biases)'),
    ('lars', '0.001 x var added to the gradient (LARS; the excluded skip the trust ratio '
             'too) on 2 variables (1 excluded: biases)'),
    ('lamb', 'none from --optimizer=lamb (its decay is 0)'),
])
def test_the_plan_block_says_what_is_decayed(name, expected):
    flags = CONFIGS[name][0] if name != 'lamb' else {}
    optimizer = create_optimizer(OptimizerConfig(optimizer=name, **flags))
    optimizer.build([tf.Variable(value, name=key) for key, value in SMALL.items()])
    assert optimizer.describe_decay() == expected


def train_on_parameter_servers(train_dir, name, steps):
    """tests/helpers/run_parameter_server_training.py's summary: lenet through the
    coordinator against 1 ps and 1 worker, in a process of its own (it joins a cluster)."""
    root = pathlib.Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, str(root / 'tests' / 'helpers' / 'run_parameter_server_training.py'),
         str(train_dir), name, str(steps)],
        cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True,
        text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # three processes joining a cluster: ~15 s each
@pytest.mark.parametrize('name', DECOUPLED_NAMES)
def test_parameter_servers_hold_the_slots_and_a_checkpoint_resumes_exactly(name, tmp_path):
    whole = train_on_parameter_servers(tmp_path / 'whole', name, 6)
    assert whole['runner'] == 'CoordinatorRunner' and whole['global_step'] == 6
    assert whole['optimizer_devices'] == ['/job:ps/replica:0/task:0/device:CPU:0']
    train_on_parameter_servers(tmp_path / 'resumed', name, 3)
    resumed = train_on_parameter_servers(tmp_path / 'resumed', name, 6)
    assert resumed['global_step'] == 6
    testing_utils.assert_bit_identical(
        testing_utils.trained_state(tmp_path / 'whole', 6),
        testing_utils.trained_state(tmp_path / 'resumed', 6))
