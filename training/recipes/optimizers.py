"""Optimizers with TF1 update rules, for TF-Slim recipes, and the factory of every
--optimizer (the modern ones, adamw, lamb, lars, lion and muon, are in
training.recipes.decoupled_optimizers).

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
from typing import Dict, List, Optional

import tensorflow as tf

from core import checks
from core.errors import UsageError
from training.recipes import decoupled_optimizers as decoupled
from training.recipes.optimizer_base import Optimizer, constant as _constant
from training.recipes.weight_decay_masks import DecayMask


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
    # BEiT's and timm's layer-wise rate decay (nets.layer_depths); 0: off.
    layer_decay: float = 0.0
    # The modern optimizers' hyper-parameters: the reference's argument names (Keras 3's
    # AdamW, Lamb, Lion, Muon; Model Garden's LARS) after the optimizer's name, and its
    # defaults. Each belongs to its optimizer: another refuses it (set off its default).
    adamw_beta_1: float = 0.9
    adamw_beta_2: float = 0.999
    adamw_epsilon: float = 1e-7
    adamw_weight_decay: float = 0.004
    lamb_beta_1: float = 0.9
    lamb_beta_2: float = 0.999
    lamb_epsilon: float = 1e-7
    lamb_weight_decay: float = 0.0
    lars_momentum: float = 0.9
    lars_eeta: float = 0.001
    lars_weight_decay_rate: float = 0.0
    lars_nesterov: bool = False
    lars_classic_momentum: bool = True
    lion_beta_1: float = 0.9
    lion_beta_2: float = 0.99
    lion_weight_decay: float = 0.0
    muon_momentum: float = 0.95
    muon_ns_steps: int = 5
    muon_nesterov: bool = True
    muon_a: float = 3.4445
    muon_b: float = -4.7750
    muon_c: float = 2.0315
    muon_rms_rate: float = 0.2  # 0: off (Keras's None)
    muon_adam_beta_1: float = 0.9
    muon_adam_beta_2: float = 0.999
    muon_epsilon: float = 1e-7
    muon_adam_lr_ratio: float = 1.0
    muon_weight_decay: float = 0.004
    muon_adam_weight_decay: float = 0.004
    muon_exclude_layers: str = ''  # comma-separated regular expressions
    muon_exclude_embeddings: bool = True
    # The decoupled optimizers' mask (training.recipes.weight_decay_masks); None: the
    # references' default, norms,biases,embeddings.
    weight_decay_exclude: Optional[str] = None

    def hyperparameters(self, name: str) -> dict:
        """The modern optimizer `name`'s fields, by its reference's argument names."""
        prefix = name + '_'
        return {field.name[len(prefix):]: getattr(self, field.name)
                for field in dataclasses.fields(self) if field.name.startswith(prefix)}

    def _check_owners(self):
        """A modern optimizer's flag set for another optimizer is a mistake."""
        for field in dataclasses.fields(self):
            owner = field.name.split('_')[0]
            if (owner in DECOUPLED_NAMES and owner != self.optimizer
                    and getattr(self, field.name) != field.default):
                raise UsageError(f'--{field.name} is a hyper-parameter of --optimizer='
                                 f'{owner}, not of --optimizer={self.optimizer}; drop it, '
                                 f'or pass --optimizer={owner}.')
        if self.weight_decay_exclude is not None and self.optimizer not in DECOUPLED_NAMES:
            raise UsageError(f'--weight_decay_exclude masks the decay of '
                             f'{", ".join(DECOUPLED_NAMES)}; --optimizer={self.optimizer} '
                             'has none: drop it.')

    def __post_init__(self):
        self._check_owners()
        checks.check_at_least(0, adamw_epsilon=self.adamw_epsilon,
                              lamb_epsilon=self.lamb_epsilon, muon_epsilon=self.muon_epsilon,
                              adamw_weight_decay=self.adamw_weight_decay,
                              lamb_weight_decay=self.lamb_weight_decay,
                              lion_weight_decay=self.lion_weight_decay,
                              lars_weight_decay_rate=self.lars_weight_decay_rate,
                              muon_weight_decay=self.muon_weight_decay,
                              muon_adam_weight_decay=self.muon_adam_weight_decay,
                              lars_eeta=self.lars_eeta, muon_rms_rate=self.muon_rms_rate,
                              muon_adam_lr_ratio=self.muon_adam_lr_ratio)
        checks.check_at_least(1, muon_ns_steps=self.muon_ns_steps)
        checks.check_fraction(layer_decay=self.layer_decay)
        checks.check_fraction(lars_momentum=self.lars_momentum,
                              muon_momentum=self.muon_momentum, lion_beta_2=self.lion_beta_2)
        checks.check_fraction(low_open=True, lion_beta_1=self.lion_beta_1)
        checks.check_fraction(high_open=True, adamw_beta_1=self.adamw_beta_1,
                              adamw_beta_2=self.adamw_beta_2, lamb_beta_1=self.lamb_beta_1,
                              lamb_beta_2=self.lamb_beta_2,
                              muon_adam_beta_1=self.muon_adam_beta_1,
                              muon_adam_beta_2=self.muon_adam_beta_2)
        checks.check_at_least(0, opt_epsilon=self.opt_epsilon)
        checks.check_fraction(adadelta_rho=self.adadelta_rho, momentum=self.momentum,
                              rmsprop_momentum=self.rmsprop_momentum,
                              rmsprop_decay=self.rmsprop_decay)
        checks.check_fraction(high_open=True, adam_beta1=self.adam_beta1,
                              adam_beta2=self.adam_beta2)


TF1_OPTIMIZER_NAMES = ('adadelta', 'adagrad', 'adam', 'ftrl', 'momentum', 'nesterov',
                       'rmsprop', 'sgd')
DECOUPLED_CLASSES = {'adamw': decoupled.AdamWOptimizer, 'lamb': decoupled.LambOptimizer,
                     'lars': decoupled.LarsOptimizer, 'lion': decoupled.LionOptimizer,
                     'muon': decoupled.MuonOptimizer}
DECOUPLED_NAMES = tuple(DECOUPLED_CLASSES)
OPTIMIZER_NAMES = tuple(sorted(TF1_OPTIMIZER_NAMES + DECOUPLED_NAMES))
# timm's rule for --learning_rate_base_batch_size: names holding 'ada' or 'lamb' scale
# their rate by the square root of the batch ratio, the others linearly.
ADAPTIVE_NAMES = tuple(name for name in OPTIMIZER_NAMES if 'ada' in name or 'lamb' in name)


class GradientDescentOptimizer(Optimizer):
    """TF1 GradientDescent: var -= lr * grad."""

    def __init__(self):
        super().__init__(name='GradientDescent')

    def _apply_dense(self, var, grad, lr):
        return tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=lr, delta=grad)


class MomentumOptimizer(Optimizer):
    """TF1 Momentum: accum = momentum * accum + grad; var -= lr * accum; with
    use_nesterov (--optimizer=nesterov), var -= lr * grad + lr * momentum * accum."""

    SLOTS = (('momentum', 'Momentum'),)

    def __init__(self, momentum, use_nesterov=False):
        super().__init__(name='Momentum')
        self.momentum = momentum
        self.use_nesterov = use_nesterov

    def _apply_dense(self, var, grad, lr, accum):
        return tf.raw_ops.ResourceApplyMomentum(
            var=var.handle, accum=accum.handle, lr=lr, grad=grad,
            momentum=_constant(self.momentum, var.dtype), use_nesterov=self.use_nesterov)


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
    """The optimizer named by config.optimizer, with slim's hyperparameter mapping (or
    the modern optimizer's reference's)."""
    if config.clip_gradient_norm < 0:
        raise UsageError(f'--clip_gradient_norm={config.clip_gradient_norm:g}; pass a '
                         'positive global norm, or 0 not to clip.')
    optimizer = _create_unclipped(config)
    optimizer.clip_gradient_norm = config.clip_gradient_norm
    optimizer.layer_decay = config.layer_decay
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
    if name in ('momentum', 'nesterov'):
        return MomentumOptimizer(momentum=config.momentum,
                                 use_nesterov=name == 'nesterov')
    if name == 'rmsprop':
        return RMSPropOptimizer(
            decay=config.rmsprop_decay, momentum=config.rmsprop_momentum,
            epsilon=config.opt_epsilon)
    if name == 'sgd':
        return GradientDescentOptimizer()
    if name in DECOUPLED_CLASSES:
        return DECOUPLED_CLASSES[name](
            mask=DecayMask.from_flag(config.weight_decay_exclude),
            **config.hyperparameters(name))
    raise UsageError(
        f"Unknown optimizer '{name}'; set --optimizer to one of: "
        f"{', '.join(OPTIMIZER_NAMES)}.")
