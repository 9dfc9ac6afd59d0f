"""Optimizers against plain-numpy TF1 update rules, slot names, MirroredStrategy, checkpoints."""
import numpy as np
import pytest
import tensorflow as tf

from core.errors import UsageError
from deployment import aggregation
from training.recipes.optimizers import (
    OPTIMIZER_NAMES, TF1_OPTIMIZER_NAMES, OptimizerConfig, create_optimizer)

INITIAL_VALUE = np.array([1.0, -2.0, 0.5, 0.0])
GRADIENTS = np.array([
    [0.1, -0.2, 0.3, 0.0],
    [-0.4, 0.5, 0.05, 1.0],
    [0.2, 0.2, -0.6, -0.3],
    [0.05, -0.1, 0.1, 0.7],
])
LEARNING_RATES = [0.1, 0.05, 0.1, 0.02]  # changes per step, as a decayed rate does


# Plain-numpy TF1 rules: each takes (var, grad, lr, state dict) and updates in place.

def numpy_sgd(config):
    def step(var, grad, lr, state):
        var -= lr * grad
    return step, {}


def numpy_momentum(config):
    def step(var, grad, lr, state):
        state['accum'] = config.momentum * state['accum'] + grad
        var -= lr * state['accum']
    return step, {'accum': np.zeros(4)}


def numpy_nesterov(config):
    def step(var, grad, lr, state):
        state['accum'] = config.momentum * state['accum'] + grad
        var -= lr * grad + lr * config.momentum * state['accum']
    return step, {'accum': np.zeros(4)}


def numpy_rmsprop(config):
    def step(var, grad, lr, state):
        state['ms'] = config.rmsprop_decay * state['ms'] + (1 - config.rmsprop_decay) * grad**2
        state['mom'] = (config.rmsprop_momentum * state['mom']
                        + lr * grad / np.sqrt(state['ms'] + config.opt_epsilon))
        var -= state['mom']
    # TF1 starts the mean square at one, not zero.
    return step, {'ms': np.ones(4), 'mom': np.zeros(4)}


def numpy_adam(config):
    b1, b2, eps = config.adam_beta1, config.adam_beta2, config.opt_epsilon

    def step(var, grad, lr, state):
        state['t'] += 1
        t = state['t']
        state['m'] = b1 * state['m'] + (1 - b1) * grad
        state['v'] = b2 * state['v'] + (1 - b2) * grad**2
        lr_t = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
        var -= lr_t * state['m'] / (np.sqrt(state['v']) + eps)
    return step, {'m': np.zeros(4), 'v': np.zeros(4), 't': 0}


def numpy_adagrad(config):
    def step(var, grad, lr, state):
        state['accum'] = state['accum'] + grad**2
        var -= lr * grad / np.sqrt(state['accum'])
    return step, {'accum': np.full(4, config.adagrad_initial_accumulator_value)}


def numpy_adadelta(config):
    rho, eps = config.adadelta_rho, config.opt_epsilon

    def step(var, grad, lr, state):
        state['accum'] = rho * state['accum'] + (1 - rho) * grad**2
        update = np.sqrt(state['accum_update'] + eps) / np.sqrt(state['accum'] + eps) * grad
        state['accum_update'] = rho * state['accum_update'] + (1 - rho) * update**2
        var -= lr * update
    return step, {'accum': np.zeros(4), 'accum_update': np.zeros(4)}


def numpy_ftrl(config):
    power, l1, l2 = config.ftrl_learning_rate_power, config.ftrl_l1, config.ftrl_l2

    def step(var, grad, lr, state):
        accum, linear = state['accum'], state['linear']
        accum_new = accum + grad**2
        linear += grad - (accum_new**-power - accum**-power) / lr * var
        quadratic = accum_new**-power / lr + 2 * l2
        var[:] = np.where(np.abs(linear) > l1, (np.sign(linear) * l1 - linear) / quadratic, 0.0)
        state['accum'] = accum_new
    return step, {'accum': np.full(4, config.ftrl_initial_accumulator_value),
                  'linear': np.zeros(4)}


NUMPY_RULES = {
    'sgd': numpy_sgd, 'momentum': numpy_momentum, 'nesterov': numpy_nesterov,
    'rmsprop': numpy_rmsprop,
    'adam': numpy_adam, 'adagrad': numpy_adagrad, 'adadelta': numpy_adadelta,
    'ftrl': numpy_ftrl,
}

CASES = [
    OptimizerConfig(optimizer='sgd'),
    OptimizerConfig(optimizer='momentum'),
    OptimizerConfig(optimizer='momentum', momentum=0.5),
    OptimizerConfig(optimizer='nesterov', momentum=0.5),
    OptimizerConfig(optimizer='rmsprop'),
    OptimizerConfig(optimizer='rmsprop', rmsprop_momentum=0.0, rmsprop_decay=0.8,
                    opt_epsilon=1e-3),
    OptimizerConfig(optimizer='adam'),
    # Small betas and epsilon make the bias correction dominate every step.
    OptimizerConfig(optimizer='adam', adam_beta1=0.5, adam_beta2=0.8, opt_epsilon=1e-3),
    OptimizerConfig(optimizer='adagrad'),
    OptimizerConfig(optimizer='adagrad', adagrad_initial_accumulator_value=0.5),
    OptimizerConfig(optimizer='adadelta'),
    OptimizerConfig(optimizer='adadelta', adadelta_rho=0.5, opt_epsilon=1e-2),
    OptimizerConfig(optimizer='ftrl'),
    OptimizerConfig(optimizer='ftrl', ftrl_l1=0.3, ftrl_l2=0.1,
                    ftrl_learning_rate_power=-0.7, ftrl_initial_accumulator_value=0.2),
]


def case_id(config):
    defaults = OptimizerConfig()
    changed = [f'{field}={getattr(config, field)}' for field in config.__dataclass_fields__
               if field != 'optimizer' and getattr(config, field) != getattr(defaults, field)]
    return '-'.join([config.optimizer] + changed)


def numpy_trajectory(config):
    step, state = NUMPY_RULES[config.optimizer](config)
    var = INITIAL_VALUE.copy()
    trajectory = []
    for grad, lr in zip(GRADIENTS, LEARNING_RATES):
        step(var, grad, lr, state)
        trajectory.append(var.copy())
    return trajectory


@pytest.mark.parametrize('in_function', [False, True], ids=['eager', 'tf_function'])
@pytest.mark.parametrize('config', CASES, ids=case_id)
def test_matches_tf1_rule(config, in_function):
    var = tf.Variable(INITIAL_VALUE, dtype=tf.float32, name='CifarNet/conv1/weights')
    optimizer = create_optimizer(config)
    optimizer.build([var])

    def train_step(grad, lr):
        optimizer.apply_gradients([(grad, var)], lr)

    if in_function:
        train_step = tf.function(train_step)
    expected = numpy_trajectory(config)
    for step, (grad, lr) in enumerate(zip(GRADIENTS, LEARNING_RATES)):
        train_step(tf.constant(grad, tf.float32), tf.constant(lr, tf.float32))
        np.testing.assert_allclose(
            var.numpy(), expected[step], rtol=2e-5, atol=1e-6, err_msg=f'step {step + 1}')


def test_ftrl_case_exercises_both_l1_branches():
    # The l1 case above only tests the l1 rule if, at every step, it clips some
    # weights to zero and leaves others.
    ftrl_l1 = next(c for c in CASES if c.optimizer == 'ftrl' and c.ftrl_l1 > 0)
    for var in numpy_trajectory(ftrl_l1):
        assert np.any(var == 0.0) and np.any(var != 0.0)


def test_python_float_learning_rate_and_numpy_gradient():
    var = tf.Variable([1.0, 2.0])
    optimizer = create_optimizer(OptimizerConfig(optimizer='sgd'))
    optimizer.build([var])
    optimizer.apply_gradients([(np.array([1.0, -1.0], np.float32), var)], 0.5)
    np.testing.assert_allclose(var.numpy(), [0.5, 2.5])


TF1_SLOT_NAMES = {
    'sgd': [],
    'momentum': ['Momentum'],
    'nesterov': ['Momentum'],  # TF1's MomentumOptimizer(use_nesterov=True)
    'rmsprop': ['RMSProp', 'RMSProp_1'],
    'adam': ['Adam', 'Adam_1'],
    'adagrad': ['Adagrad'],
    'adadelta': ['Adadelta', 'Adadelta_1'],
    'ftrl': ['Ftrl', 'Ftrl_1'],
}
TF1_SLOT_INITIAL_VALUES = {  # non-zero TF1 initial values, by slot suffix
    'RMSProp': 1.0, 'Adagrad': 0.1, 'Ftrl': 0.1,
}


@pytest.mark.parametrize('name', TF1_OPTIMIZER_NAMES)
def test_slot_names_and_initial_values_follow_tf1(name):
    weights = tf.Variable(tf.zeros([2, 3]), name='CifarNet/conv1/weights')
    biases = tf.Variable(tf.zeros([3]), name='CifarNet/conv1/biases')
    optimizer = create_optimizer(OptimizerConfig(optimizer=name))
    optimizer.build([weights, biases])

    slot_names = sorted(v.name for v in optimizer.variables
                        if not v.name.startswith('beta'))
    expected = sorted(f'CifarNet/conv1/{var}/{suffix}:0'
                      for var in ('weights', 'biases') for suffix in TF1_SLOT_NAMES[name])
    assert slot_names == expected
    for slot_key, slot in zip(optimizer.slot_keys(),
                              (optimizer.get_slot(weights, k)
                               for k in optimizer.slot_keys())):
        suffix = slot.name.split('/')[-1][:-2]
        assert slot.shape == weights.shape and not slot.trainable, slot_key
        np.testing.assert_array_equal(
            slot.numpy(),
            np.full([2, 3], TF1_SLOT_INITIAL_VALUES.get(suffix, 0.0), np.float32))


def test_tf1_slot_keys():
    assert create_optimizer(OptimizerConfig(optimizer='rmsprop')).slot_keys() == [
        'rms', 'momentum']
    assert create_optimizer(OptimizerConfig(optimizer='adam')).slot_keys() == ['m', 'v']
    assert create_optimizer(OptimizerConfig(optimizer='ftrl')).slot_keys() == [
        'accum', 'linear']


def test_adam_beta_powers_are_named_and_advanced_once_per_step():
    a = tf.Variable([1.0], name='a')
    b = tf.Variable([2.0], name='b')
    optimizer = create_optimizer(OptimizerConfig(optimizer='adam'))
    optimizer.build([a, b])
    optimizer.build([a])  # building again must not reset anything
    assert optimizer.beta1_power.name == 'beta1_power:0'
    assert optimizer.beta2_power.name == 'beta2_power:0'
    optimizer.apply_gradients([(tf.constant([1.0]), a), (tf.constant([1.0]), b)], 0.1)
    optimizer.apply_gradients([(tf.constant([1.0]), a), (tf.constant([1.0]), b)], 0.1)
    np.testing.assert_allclose(optimizer.beta1_power.numpy(), 0.9**3, rtol=1e-6)
    np.testing.assert_allclose(optimizer.beta2_power.numpy(), 0.999**3, rtol=1e-6)


def test_none_gradients_are_skipped():
    trained = tf.Variable([1.0, 1.0], name='trained')
    frozen = tf.Variable([5.0, 5.0], name='frozen')
    optimizer = create_optimizer(OptimizerConfig(optimizer='momentum'))
    optimizer.build([trained, frozen])
    optimizer.apply_gradients([(tf.constant([1.0, 2.0]), trained), (None, frozen)], 0.1)
    np.testing.assert_allclose(trained.numpy(), [0.9, 0.8])
    np.testing.assert_array_equal(frozen.numpy(), [5.0, 5.0])
    np.testing.assert_array_equal(optimizer.get_slot(frozen, 'momentum').numpy(), [0.0, 0.0])


def test_two_variables_with_one_name_are_rejected():
    optimizer = create_optimizer(OptimizerConfig(optimizer='momentum'))
    optimizer.build([tf.Variable([1.0], name='same')])
    with pytest.raises(ValueError, match='unique'):
        optimizer.build([tf.Variable([2.0], name='same')])


def test_apply_before_build_names_the_fix():
    var = tf.Variable([1.0], name='unbuilt')
    optimizer = create_optimizer(OptimizerConfig(optimizer='rmsprop'))
    with pytest.raises(ValueError, match=r'build\(\)'):
        optimizer.apply_gradients([(tf.constant([1.0]), var)], 0.1)


def test_unknown_optimizer_lists_valid_names():
    with pytest.raises(UsageError) as error:
        create_optimizer(OptimizerConfig(optimizer='sgdw'))
    message = str(error.value)
    assert "'sgdw'" in message and '--optimizer' in message
    for name in OPTIMIZER_NAMES:
        assert name in message


@pytest.mark.parametrize('config, flag', [
    (OptimizerConfig(optimizer='adagrad', adagrad_initial_accumulator_value=0.0),
     '--adagrad_initial_accumulator_value'),
    (OptimizerConfig(optimizer='ftrl', ftrl_initial_accumulator_value=-1.0),
     '--ftrl_initial_accumulator_value'),
    (OptimizerConfig(optimizer='ftrl', ftrl_learning_rate_power=0.5),
     '--ftrl_learning_rate_power'),
    (OptimizerConfig(optimizer='ftrl', ftrl_l1=-0.1), '--ftrl_l1'),
])
def test_invalid_hyperparameters_rejected_as_tf1_did(config, flag):
    with pytest.raises(UsageError, match=flag):
        create_optimizer(config)


def test_optimizer_names():
    assert set(TF1_OPTIMIZER_NAMES) == set(NUMPY_RULES)
    assert set(TF1_OPTIMIZER_NAMES) < set(OPTIMIZER_NAMES)
    assert OptimizerConfig().optimizer == 'rmsprop'


# MirroredStrategy over the two logical CPUs made by tests/conftest.py.

@pytest.mark.parametrize('name', ['adam', 'rmsprop'])
def test_mirrored_all_reduce_then_apply_keeps_copies_identical(name):
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
    assert strategy.num_replicas_in_sync == 2
    config = OptimizerConfig(optimizer=name)
    with strategy.scope():
        var = tf.Variable(INITIAL_VALUE, dtype=tf.float32, name='CifarNet/logits/weights')
        optimizer = create_optimizer(config)
        optimizer.build([var])

    # Replica r gets its own gradient; the update must use their sum.
    per_replica_parts = [GRADIENTS * 0.25, GRADIENTS * 0.75 + 0.1]
    summed = per_replica_parts[0] + per_replica_parts[1]

    @tf.function
    def train_step(step, lr):
        grads = strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant(
                per_replica_parts[ctx.replica_id_in_sync_group], tf.float32)[step])

        def replica_fn(grad):
            # The step split: aggregate (all-reduce SUM), then apply on each replica.
            optimizer.apply_gradients(aggregation.AllReduce().aggregate([(grad, var)]), lr)
        strategy.run(replica_fn, args=(grads,))

    step_rule, state = NUMPY_RULES[name](config)
    expected = INITIAL_VALUE.copy()
    for step in range(3):
        train_step(tf.constant(step), tf.constant(LEARNING_RATES[step]))
        step_rule(expected, summed[step], LEARNING_RATES[step], state)

        copies = [v.numpy() for v in var.values]
        np.testing.assert_array_equal(copies[0], copies[1])
        np.testing.assert_allclose(copies[0], expected, rtol=2e-5, atol=1e-6)
        for slot_key in optimizer.slot_keys():
            slot_copies = [v.numpy() for v in optimizer.get_slot(var, slot_key).values]
            np.testing.assert_array_equal(slot_copies[0], slot_copies[1])
    if name == 'adam':
        for power in (optimizer.beta1_power, optimizer.beta2_power):
            assert isinstance(power, tf.distribute.DistributedValues)
        powers = [v.numpy() for v in optimizer.beta1_power.values]
        np.testing.assert_allclose(powers, [0.9**4, 0.9**4], rtol=1e-6)


@pytest.mark.parametrize('name', ['adam', 'rmsprop', 'ftrl'])
def test_checkpoint_round_trip_restores_slots(name, tmp_path):
    config = OptimizerConfig(optimizer=name)

    def make():
        weights = tf.Variable(INITIAL_VALUE, dtype=tf.float32, name='CifarNet/conv1/weights')
        biases = tf.Variable([0.5, -0.5], name='CifarNet/conv1/biases')
        optimizer = create_optimizer(config)
        optimizer.build([weights, biases])
        return weights, biases, optimizer

    def train(weights, biases, optimizer, steps):
        for step in steps:
            optimizer.apply_gradients(
                [(tf.constant(GRADIENTS[step], tf.float32), weights),
                 (tf.constant(GRADIENTS[step][:2], tf.float32), biases)],
                LEARNING_RATES[step])

    weights, biases, optimizer = make()
    train(weights, biases, optimizer, [0, 1])
    path = tf.train.Checkpoint(weights=weights, biases=biases, optimizer=optimizer).save(
        str(tmp_path / 'ckpt'))

    restored_weights, restored_biases, restored_optimizer = make()
    tf.train.Checkpoint(
        weights=restored_weights, biases=restored_biases, optimizer=restored_optimizer,
    ).restore(path).assert_consumed()
    assert len(restored_optimizer.variables) == len(optimizer.variables) > 0
    for original, restored in zip(sorted(optimizer.variables, key=lambda v: v.name),
                                  sorted(restored_optimizer.variables, key=lambda v: v.name)):
        assert original.name == restored.name
        np.testing.assert_array_equal(original.numpy(), restored.numpy())

    # Training on from the restored state continues the same trajectory.
    train(weights, biases, optimizer, [2])
    train(restored_weights, restored_biases, restored_optimizer, [2])
    np.testing.assert_array_equal(weights.numpy(), restored_weights.numpy())


@pytest.mark.parametrize('name', ['adam', 'rmsprop'])
def test_partitioned_variable_pieces_update_like_the_whole(name):
    # As ParameterServerStrategy's partitioners make them: the optimizer sees the pieces
    # (each with its own slots); together they follow the unpartitioned rule.
    from tensorflow.python.distribute.sharded_variable import ShardedVariable  # pylint: disable=g-direct-tensorflow-import
    config = OptimizerConfig(optimizer=name)
    sharded = ShardedVariable([tf.Variable(INITIAL_VALUE[:2], name='w/part_0'),
                               tf.Variable(INITIAL_VALUE[2:], name='w/part_1')])
    pieces = list(sharded.variables)
    optimizer = create_optimizer(config)
    optimizer.build(pieces)
    step_rule, state = NUMPY_RULES[name](config)
    expected = INITIAL_VALUE.copy()
    for step in range(3):
        gradient = GRADIENTS[step]
        optimizer.apply_gradients([(gradient[:2], pieces[0]), (gradient[2:], pieces[1])],
                                  LEARNING_RATES[step])
        step_rule(expected, gradient, LEARNING_RATES[step], state)
    np.testing.assert_allclose(np.concatenate([p.numpy() for p in pieces]), expected,
                               rtol=2e-5, atol=1e-6)
    assert optimizer.get_slot(pieces[1], optimizer.slot_keys()[0]).name.startswith(
        'w/part_1/')


# --clip_gradient_norm: one global norm over all variables, after aggregation.

def test_clipping_scales_all_gradients_to_the_global_norm():
    a = tf.Variable([0.0, 0.0], name='a')
    b = tf.Variable([0.0], name='b')
    optimizer = create_optimizer(OptimizerConfig(optimizer='sgd', clip_gradient_norm=1.0))
    optimizer.build([a, b])
    # Global norm sqrt(3^2 + 4^2) = 5: both scaled by 1/5, not each clipped to 1.
    norm = optimizer.apply_gradients([(tf.constant([3.0, 0.0]), a),
                                      (tf.constant([4.0]), b)], 1.0)
    assert float(norm) == pytest.approx(5.0)
    np.testing.assert_allclose(a.numpy(), [-0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), [-0.8], rtol=1e-6)
    # Below the bound the gradients pass unchanged.
    optimizer.apply_gradients([(tf.constant([0.3, 0.0]), a), (tf.constant([0.4]), b)], 1.0)
    np.testing.assert_allclose(a.numpy(), [-0.9, 0.0], rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), [-1.2], rtol=1e-6)


def test_no_clipping_by_default_and_negative_bound_refused():
    var = tf.Variable([0.0], name='unclipped')
    optimizer = create_optimizer(OptimizerConfig(optimizer='sgd'))
    optimizer.build([var])
    assert optimizer.apply_gradients([(tf.constant([100.0]), var)], 1.0) is None
    np.testing.assert_allclose(var.numpy(), [-100.0])
    with pytest.raises(UsageError, match='--clip_gradient_norm'):
        create_optimizer(OptimizerConfig(clip_gradient_norm=-1.0))


def test_mirrored_clipping_bounds_the_all_reduced_gradient():
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
    with strategy.scope():
        var = tf.Variable(INITIAL_VALUE, dtype=tf.float32, name='Net/clipped/weights')
        optimizer = create_optimizer(OptimizerConfig(optimizer='sgd', clip_gradient_norm=0.5))
        optimizer.build([var])
    # Each replica's part has norm < 0.5; their sum (what the update uses) has norm > 0.5.
    parts = [GRADIENTS[1] * 0.3, GRADIENTS[1] * 0.4]
    assert all(np.linalg.norm(p) < 0.5 for p in parts)
    summed = parts[0] + parts[1]

    @tf.function
    def train_step():
        grads = strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant(parts[0], tf.float32) if ctx.replica_id_in_sync_group == 0
            else tf.constant(parts[1], tf.float32))
        strategy.run(lambda grad: optimizer.apply_gradients(
            aggregation.AllReduce().aggregate([(grad, var)]), 1.0), args=(grads,))

    train_step()
    copies = [v.numpy() for v in var.values]
    np.testing.assert_array_equal(copies[0], copies[1])
    step = INITIAL_VALUE - copies[0]
    np.testing.assert_allclose(np.linalg.norm(step), 0.5, rtol=1e-5)
    np.testing.assert_allclose(step, summed * 0.5 / np.linalg.norm(summed), rtol=1e-5)
