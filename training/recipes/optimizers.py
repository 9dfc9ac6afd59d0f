"""Optimizers with TF1 update rules, for TF-Slim recipes.

Slim's hyperparameters (e.g. RMSProp with opt_epsilon=1.0 inside the square root)
were tuned for the TF1 optimizers, whose rules differ from Keras's. Each optimizer
here applies its update with the TF1 training kernel itself (tf.raw_ops.ResourceApply*)
and names its slot variables as TF1 did, e.g. 'CifarNet/conv1/weights/RMSProp'.

The optimizer is the last third of the step split (compute gradients -> aggregate ->
apply): it applies gradients that deployment.aggregation already combined, with no
cross-replica communication of its own. Usage, with the variables already created:

    optimizer = create_optimizer(OptimizerConfig(optimizer='momentum'))
    with strategy.scope():
        optimizer.build(variables)
    optimizer.apply_gradients(aggregator.aggregate(zip(grads, variables)), learning_rate)

Variables are plain or mirrored ones, or partitioned variables' pieces (own slots).
"""
import dataclasses
from typing import Dict, List

import tensorflow as tf

from core import checks
from core.errors import UsageError
from core.naming import slim_name


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """The optimizer flags of TF-Slim's train_image_classifier.py, same names and defaults."""
    optimizer: str = 'rmsprop'
    opt_epsilon: float = 1.0
    adadelta_rho: float = 0.95
    adagrad_initial_accumulator_value: float = 0.1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    ftrl_learning_rate_power: float = -0.5
    ftrl_initial_accumulator_value: float = 0.1
    ftrl_l1: float = 0.0
    ftrl_l2: float = 0.0
    momentum: float = 0.9
    rmsprop_momentum: float = 0.9
    rmsprop_decay: float = 0.9
    # Not a flag of slim's script: slim's create_train_op argument, as a global norm.
    clip_gradient_norm: float = 0.0

    def __post_init__(self):
        checks.check_at_least(0, opt_epsilon=self.opt_epsilon)
        checks.check_fraction(adadelta_rho=self.adadelta_rho, momentum=self.momentum,
                              rmsprop_momentum=self.rmsprop_momentum,
                              rmsprop_decay=self.rmsprop_decay)
        checks.check_fraction(high_open=True, adam_beta1=self.adam_beta1,
                              adam_beta2=self.adam_beta2)


OPTIMIZER_NAMES = ('adadelta', 'adagrad', 'adam', 'ftrl', 'momentum', 'rmsprop', 'sgd')


def _constant(value, dtype):
    return tf.constant(value, dtype=dtype)


class Optimizer(tf.Module):
    """Base class: slot bookkeeping and the per-variable update.

    Subclasses list their slots in SLOTS as (TF1 slot key, TF1 name suffix) in TF1's
    creation order, and implement _apply_dense with a TF1 training kernel.
    """

    SLOTS = ()
    # > 0: apply_gradients rescales the gradients so their global norm is at most this.
    clip_gradient_norm = 0.0

    def __init__(self, name):
        super().__init__(name=name)
        # {variable name: {slot key: slot variable}}; keyed by name so checkpoints
        # do not depend on the order variables were built in.
        self._slots = {}
        # TF2 does not make variable names unique, so remember whose slots they are.
        self._slot_owners = {}

    def build(self, variables):
        """Creates the slot variables for `variables`; call it inside strategy.scope().

        Variables that already have slots are left alone, so calling it again is safe.
        """
        variables = list(variables)
        for var in variables:
            key = slim_name(var)
            owner = self._slot_owners.get(key)
            if owner is not None:
                if owner != var.ref():
                    raise ValueError(
                        f"Two different variables are named '{key}'; give them unique "
                        'names, since slots are named and checkpointed by variable name.')
                continue
            self._slot_owners[key] = var.ref()
            slots = {}
            # Slots live beside their variable (on its parameter server, if any).
            with tf.distribute.get_strategy().extended.colocate_vars_with(var):
                for slot_key, suffix in self.SLOTS:
                    slots[slot_key] = tf.Variable(
                        self._slot_initial_value(slot_key, var), name=f'{key}/{suffix}',
                        trainable=False, dtype=var.dtype)
            self._slots[key] = slots
        if variables:
            self._build_non_slot_variables(variables)

    def get_slot(self, var, slot_key):
        """The slot variable of `var` under its TF1 slot key (e.g. 'rms', 'momentum')."""
        return self._slots[slim_name(var)][slot_key]

    def slot_keys(self):
        """TF1 slot keys of this optimizer, in creation order."""
        # Not named get_slot_names: tf.train.Checkpoint would then treat this as a
        # TF1/Keras optimizer and re-key the slots under their variables.
        return [slot_key for slot_key, _ in self.SLOTS]

    def apply_gradients(self, grads_and_vars, learning_rate):
        """Applies aggregated gradients, one TF1 kernel per variable, where it runs.

        In replica context each replica updates its own copy of a mirrored variable
        (`var.handle` is the local copy) with the same aggregated gradient, so the copies
        stay equal, as TF's own MirroredStrategy updates do; on a parameter-server
        worker the variables are the servers'. Gradients that are None are skipped;
        IndexedSlices are made dense (TF1's sparse row updates are not reproduced).

        With clip_gradient_norm > 0 the gradients are first scaled together so that
        their global norm (over all variables, after aggregation: every replica sees the
        same) is at most clip_gradient_norm; slim's clip_gradient_norm clipped each
        tensor on its own. Returns the global norm before clipping, or None without it.
        """
        pairs = [(tf.convert_to_tensor(grad), var)
                 for grad, var in grads_and_vars if grad is not None]
        if not pairs:
            return None
        global_norm = None
        if self.clip_gradient_norm > 0:
            clipped, global_norm = tf.clip_by_global_norm(
                [grad for grad, _ in pairs], self.clip_gradient_norm)
            pairs = [(grad, var) for grad, (_, var) in zip(clipped, pairs)]
        missing = [slim_name(var) for _, var in pairs
                   if slim_name(var) not in self._slots]
        if missing:
            raise ValueError(
                f'Optimizer.build() was not called for {missing}; call it inside '
                'strategy.scope() before apply_gradients().')
        for grad, var in pairs:
            slots = [self._slots[slim_name(var)][slot_key] for slot_key, _ in self.SLOTS]
            self._apply_dense(var, grad, tf.cast(learning_rate, var.dtype), *slots)
        self._finish()
        return global_norm

    def _slot_initial_value(self, slot_key, var):
        """Initial value of a slot; zeros unless the subclass overrides it."""
        del slot_key
        return tf.zeros(var.shape, var.dtype)

    def _build_non_slot_variables(self, variables):
        """Creates variables shared by all slots (Adam's beta powers)."""

    def _apply_dense(self, var, grad, lr, *slots):
        raise NotImplementedError

    def _finish(self):
        """Runs once per apply_gradients after all variable updates (Adam's beta powers)."""
        return None


class GradientDescentOptimizer(Optimizer):
    """TF1 GradientDescent: var -= lr * grad."""

    def __init__(self):
        super().__init__(name='GradientDescent')

    def _apply_dense(self, var, grad, lr):
        return tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=lr, delta=grad)


class MomentumOptimizer(Optimizer):
    """TF1 Momentum: accum = momentum * accum + grad; var -= lr * accum."""

    SLOTS = (('momentum', 'Momentum'),)

    def __init__(self, momentum):
        super().__init__(name='Momentum')
        self.momentum = momentum

    def _apply_dense(self, var, grad, lr, accum):
        return tf.raw_ops.ResourceApplyMomentum(
            var=var.handle, accum=accum.handle, lr=lr, grad=grad,
            momentum=_constant(self.momentum, var.dtype), use_nesterov=False)


class RMSPropOptimizer(Optimizer):
    """TF1 RMSProp, epsilon inside the square root and the 'rms' slot starting at one.

    ms = decay * ms + (1 - decay) * grad^2
    mom = momentum * mom + lr * grad / sqrt(ms + epsilon)
    var -= mom
    """

    SLOTS = (('rms', 'RMSProp'), ('momentum', 'RMSProp_1'))

    def __init__(self, decay, momentum, epsilon):
        super().__init__(name='RMSProp')
        self.decay = decay
        self.momentum = momentum
        self.epsilon = epsilon

    def _slot_initial_value(self, slot_key, var):
        if slot_key == 'rms':
            return tf.ones(var.shape, var.dtype)
        return super()._slot_initial_value(slot_key, var)

    def _apply_dense(self, var, grad, lr, rms, mom):
        dtype = var.dtype
        return tf.raw_ops.ResourceApplyRMSProp(
            var=var.handle, ms=rms.handle, mom=mom.handle, lr=lr,
            rho=_constant(self.decay, dtype), momentum=_constant(self.momentum, dtype),
            epsilon=_constant(self.epsilon, dtype), grad=grad)


class AdamOptimizer(Optimizer):
    """TF1 Adam, with bias correction folded into the step size.

    m = beta1 * m + (1 - beta1) * grad;  v = beta2 * v + (1 - beta2) * grad^2
    var -= lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + epsilon)
    beta1^t and beta2^t live in the non-slot variables 'beta1_power', 'beta2_power'.
    """

    SLOTS = (('m', 'Adam'), ('v', 'Adam_1'))

    def __init__(self, beta1, beta2, epsilon):
        super().__init__(name='Adam')
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.beta1_power = None
        self.beta2_power = None

    def _build_non_slot_variables(self, variables):
        if self.beta1_power is not None:
            return
        # Like TF1, the beta powers start at beta (not 1): the first step uses beta^1.
        dtype = variables[0].dtype
        self.beta1_power = tf.Variable(
            self.beta1, name='beta1_power', trainable=False, dtype=dtype)
        self.beta2_power = tf.Variable(
            self.beta2, name='beta2_power', trainable=False, dtype=dtype)

    def _apply_dense(self, var, grad, lr, m, v):
        dtype = var.dtype
        return tf.raw_ops.ResourceApplyAdam(
            var=var.handle, m=m.handle, v=v.handle,
            beta1_power=tf.cast(self.beta1_power, dtype),
            beta2_power=tf.cast(self.beta2_power, dtype),
            lr=lr, beta1=_constant(self.beta1, dtype), beta2=_constant(self.beta2, dtype),
            epsilon=_constant(self.epsilon, dtype), grad=grad, use_nesterov=False)

    def _finish(self):
        # Once per step, after every variable's update has read the old powers (automatic
        # control dependencies keep that order). The raw op updates this replica's copy.
        for power, beta in ((self.beta1_power, self.beta1), (self.beta2_power, self.beta2)):
            tf.raw_ops.AssignVariableOp(
                resource=power.handle, value=power * tf.cast(beta, power.dtype))


class AdagradOptimizer(Optimizer):
    """TF1 Adagrad, no epsilon: accum += grad^2; var -= lr * grad / sqrt(accum)."""

    SLOTS = (('accumulator', 'Adagrad'),)

    def __init__(self, initial_accumulator_value):
        if initial_accumulator_value <= 0.0:
            raise UsageError(
                f'adagrad_initial_accumulator_value is {initial_accumulator_value}; '
                'set --adagrad_initial_accumulator_value to a positive number.')
        super().__init__(name='Adagrad')
        self.initial_accumulator_value = initial_accumulator_value

    def _slot_initial_value(self, slot_key, var):
        return tf.fill(var.shape, tf.cast(self.initial_accumulator_value, var.dtype))

    def _apply_dense(self, var, grad, lr, accum):
        return tf.raw_ops.ResourceApplyAdagrad(
            var=var.handle, accum=accum.handle, lr=lr, grad=grad, update_slots=True)


class AdadeltaOptimizer(Optimizer):
    """TF1 Adadelta (note the kernel scales the step by lr).

    accum = rho * accum + (1 - rho) * grad^2
    update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad
    accum_update = rho * accum_update + (1 - rho) * update^2
    var -= lr * update
    """

    SLOTS = (('accum', 'Adadelta'), ('accum_update', 'Adadelta_1'))

    def __init__(self, rho, epsilon):
        super().__init__(name='Adadelta')
        self.rho = rho
        self.epsilon = epsilon

    def _apply_dense(self, var, grad, lr, accum, accum_update):
        dtype = var.dtype
        return tf.raw_ops.ResourceApplyAdadelta(
            var=var.handle, accum=accum.handle, accum_update=accum_update.handle, lr=lr,
            rho=_constant(self.rho, dtype), epsilon=_constant(self.epsilon, dtype),
            grad=grad)


class FtrlOptimizer(Optimizer):
    """TF1 FTRL-proximal (ResourceApplyFtrl; slim never sets l2 shrinkage).

    accum_new = accum + grad^2
    linear += grad - (accum_new^-p - accum^-p) / lr * var        (p = learning_rate_power)
    var = (sign(linear) * l1 - linear) / (accum_new^-p / lr + 2 * l2) if |linear| > l1 else 0
    accum = accum_new
    """

    SLOTS = (('accum', 'Ftrl'), ('linear', 'Ftrl_1'))

    def __init__(self, learning_rate_power, initial_accumulator_value, l1, l2):
        # The same checks as TF1's FtrlOptimizer, phrased as the flag to fix.
        if initial_accumulator_value <= 0.0:
            raise UsageError(
                f'ftrl_initial_accumulator_value is {initial_accumulator_value}; '
                'set --ftrl_initial_accumulator_value to a positive number.')
        if learning_rate_power > 0.0:
            raise UsageError(
                f'ftrl_learning_rate_power is {learning_rate_power}; '
                'set --ftrl_learning_rate_power to zero or a negative number.')
        if l1 < 0.0 or l2 < 0.0:
            raise UsageError(
                f'ftrl_l1 is {l1} and ftrl_l2 is {l2}; '
                'set --ftrl_l1 and --ftrl_l2 to zero or positive numbers.')
        super().__init__(name='Ftrl')
        self.learning_rate_power = learning_rate_power
        self.initial_accumulator_value = initial_accumulator_value
        self.l1 = l1
        self.l2 = l2

    def _slot_initial_value(self, slot_key, var):
        if slot_key == 'accum':
            return tf.fill(var.shape, tf.cast(self.initial_accumulator_value, var.dtype))
        return super()._slot_initial_value(slot_key, var)

    def _apply_dense(self, var, grad, lr, accum, linear):
        dtype = var.dtype
        return tf.raw_ops.ResourceApplyFtrl(
            var=var.handle, accum=accum.handle, linear=linear.handle, grad=grad, lr=lr,
            l1=_constant(self.l1, dtype), l2=_constant(self.l2, dtype),
            lr_power=_constant(self.learning_rate_power, dtype),
            multiply_linear_by_lr=False)


def slots_by_optimizer() -> Dict[str, List[str]]:
    """Each --optimizer's slot keys, as object checkpoints key them."""
    return {name: _create_unclipped(OptimizerConfig(name)).slot_keys() for name in OPTIMIZER_NAMES}


def create_optimizer(config: OptimizerConfig) -> Optimizer:
    """The optimizer named by config.optimizer, with slim's hyperparameter mapping."""
    if config.clip_gradient_norm < 0:
        raise UsageError(f'--clip_gradient_norm={config.clip_gradient_norm:g}; pass a '
                         'positive global norm, or 0 not to clip.')
    optimizer = _create_unclipped(config)
    optimizer.clip_gradient_norm = config.clip_gradient_norm
    return optimizer


def _create_unclipped(config: OptimizerConfig) -> Optimizer:
    name = config.optimizer
    if name == 'adadelta':
        return AdadeltaOptimizer(rho=config.adadelta_rho, epsilon=config.opt_epsilon)
    if name == 'adagrad':
        return AdagradOptimizer(
            initial_accumulator_value=config.adagrad_initial_accumulator_value)
    if name == 'adam':
        return AdamOptimizer(
            beta1=config.adam_beta1, beta2=config.adam_beta2, epsilon=config.opt_epsilon)
    if name == 'ftrl':
        return FtrlOptimizer(
            learning_rate_power=config.ftrl_learning_rate_power,
            initial_accumulator_value=config.ftrl_initial_accumulator_value,
            l1=config.ftrl_l1, l2=config.ftrl_l2)
    if name == 'momentum':
        return MomentumOptimizer(momentum=config.momentum)
    if name == 'rmsprop':
        return RMSPropOptimizer(
            decay=config.rmsprop_decay, momentum=config.rmsprop_momentum,
            epsilon=config.opt_epsilon)
    if name == 'sgd':
        return GradientDescentOptimizer()
    raise UsageError(
        f"Unknown optimizer '{name}'; set --optimizer to one of: "
        f"{', '.join(OPTIMIZER_NAMES)}.")
