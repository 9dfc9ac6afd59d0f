"""AdamW, LAMB, Lion and Muon as Keras 3 defines them, LARS as the TF Model Garden does.

Each follows its reference's update, hyper-parameters and defaults (tests/training/
test_decoupled_optimizers.py compares five steps on lenet and cifarnet with Keras 3's
optimizers and a numpy LARS), on the project's optimizer base: slots named by variable
('CifarNet/conv1/weights/AdamW'), checkpointed with the run, updated where each variable
lives (each replica's copy, or a parameter server's).

Weight decay is decoupled, as Loshchilov & Hutter and PyTorch/Keras define it: before
the update, var -= learning_rate * weight_decay * var, on the variables the DecayMask
keeps (training.recipes.weight_decay_masks). LARS folds its decay into the gradient
(grad += weight_decay_rate * var) before the trust ratio, as Model Garden's; its masked
variables skip both the decay and the trust ratio. The step count t of the bias
corrections is the 'iterations' variable, advanced once per update.

Partitioned variables' pieces are updated on their own: LAMB's and LARS's norms and
Muon's orthogonalisation then see a piece, not the whole matrix.
"""
import math
import re

import tensorflow as tf

from core.naming import slim_name
from training.recipes.optimizer_base import Optimizer
from training.recipes.weight_decay_masks import DecayMask, category_of


def _read(variable):
    """This replica's (or the server's) value: the copy `handle` names."""
    return tf.raw_ops.ReadVariableOp(resource=variable.handle, dtype=variable.dtype)


def _assign(variable, value):
    tf.raw_ops.AssignVariableOp(resource=variable.handle, value=value)


class DecoupledOptimizer(Optimizer):
    """Base of the modern optimizers: the mask, decoupled decay, the step count.

    Subclasses implement _update(var, value, grad, lr, slots, decays) -> (new value, new
    slots): value and slots are the tensors read (value after the decay), var gives the
    shape and dtype, `decays` is the mask's verdict for it.
    """

    DECOUPLED = True  # False: the subclass applies weight_decay itself (LARS)

    def __init__(self, name, *, weight_decay, mask: DecayMask):
        super().__init__(name=name)
        self.weight_decay = weight_decay
        self.mask = mask
        self.iterations = None
        self._decays = {}  # variable name -> the mask's verdict (not checkpointed)
        self._decay_values = {}  # variable name -> its weight decay

    def build(self, variables):
        variables = list(variables)
        if not self._decays:  # the first build is given the trained variables
            self.mask.check_matches(variables)
        super().build(variables)
        for var in variables:
            self._decays[slim_name(var)] = self.mask.decays(var)
            self._decay_values[slim_name(var)] = self._weight_decay_of(var)

    def decay_counts(self):
        """(decayed, excluded) among the variables built for, by name."""
        decayed = sum(self._decays.values())
        return decayed, len(self._decays) - decayed

    def describe_decay(self) -> str:
        """The plan block's account of this optimizer's decay, e.g. 'decoupled 0.05 x
        learning rate on 4 variables (4 excluded: biases)'."""
        decayed, excluded = self.decay_counts()
        values = sorted({self._decay_values[name] for name, decays in self._decays.items()
                         if decays and self._decay_values[name]})
        categories = sorted({category_of(name) for name, decays in self._decays.items()
                             if not decays})
        spared = f'{excluded} excluded' + (f': {", ".join(categories)}' if excluded else '')
        if not values:
            return f'none from --optimizer={self.name.lower()} (its decay is 0)'
        rates = ' / '.join(f'{value:g}' for value in values)
        how = (f'{rates} x var added to the gradient (LARS; the excluded skip the trust '
               'ratio too)' if not self.DECOUPLED else f'decoupled {rates} x learning rate')
        return f'{how} on {decayed} variables ({spared})'

    def _build_non_slot_variables(self, variables):
        if self.iterations is None:
            self.iterations = tf.Variable(0, dtype=tf.int64, name='iterations',
                                          trainable=False)

    def _weight_decay_of(self, var):
        del var
        return self.weight_decay

    def _step_count(self, dtype):
        """t of this update, from 1."""
        return tf.cast(_read(self.iterations) + 1, dtype)

    def _apply_dense(self, var, grad, lr, *slots):
        grad = tf.cast(grad, var.dtype)
        value = _read(var)
        decays = self._decays[slim_name(var)]
        weight_decay = self._weight_decay_of(var)
        if self.DECOUPLED and decays and weight_decay:
            value = value - value * tf.cast(weight_decay, var.dtype) * lr
        new_value, new_slots = self._update(var, value, grad, lr,
                                            [_read(slot) for slot in slots], decays)
        for slot, new_slot in zip(slots, new_slots):
            _assign(slot, new_slot)
        _assign(var, new_value)

    def _update(self, var, value, grad, lr, slots, decays):
        raise NotImplementedError

    def _finish(self):
        tf.raw_ops.AssignAddVariableOp(resource=self.iterations.handle,
                                       value=tf.constant(1, tf.int64))


def _adam_moments(grad, m, v, beta_1, beta_2):
    """Keras's moment updates: m += (g - m)(1 - beta_1), v += (g^2 - v)(1 - beta_2)."""
    return m + (grad - m) * (1 - beta_1), v + (tf.square(grad) - v) * (1 - beta_2)


class AdamWOptimizer(DecoupledOptimizer):
    """AdamW (Loshchilov & Hutter 2019), as keras.optimizers.AdamW:
    var -= lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon)."""

    SLOTS = (('adamw_m', 'AdamW'), ('adamw_v', 'AdamW_1'))

    def __init__(self, *, beta_1, beta_2, epsilon, weight_decay, mask):
        super().__init__('AdamW', weight_decay=weight_decay, mask=mask)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon

    def _update(self, var, value, grad, lr, slots, decays):
        return adam_update(value, grad, lr, slots, self._step_count(var.dtype),
                           self.beta_1, self.beta_2, self.epsilon)


def adam_update(value, grad, lr, slots, t, beta_1, beta_2, epsilon):
    """Keras 3's Adam step on tensors: (new value, [m, v])."""
    m, v = _adam_moments(grad, *slots, beta_1, beta_2)
    alpha = lr * tf.sqrt(1 - tf.pow(beta_2, t)) / (1 - tf.pow(beta_1, t))
    return value - m * alpha / (tf.sqrt(v) + epsilon), [m, v]


def _trust_ratio(numerator_norm, denominator_norm, scale=1.0):
    """scale * |w| / |u|, or 1 when either norm is zero (LAMB's and LARS's guard)."""
    return tf.where(numerator_norm > 0,
                    tf.where(denominator_norm > 0,
                             scale * numerator_norm / denominator_norm, 1.0), 1.0)


class LambOptimizer(DecoupledOptimizer):
    """LAMB (You et al. 2020), as keras.optimizers.Lamb: Adam's bias-corrected direction
    u = m_hat / (sqrt(v_hat) + epsilon), scaled by |var| / |u| per variable."""

    SLOTS = (('lamb_m', 'Lamb'), ('lamb_v', 'Lamb_1'))

    def __init__(self, *, beta_1, beta_2, epsilon, weight_decay, mask):
        super().__init__('Lamb', weight_decay=weight_decay, mask=mask)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon

    def _update(self, var, value, grad, lr, slots, decays):
        t = self._step_count(var.dtype)
        m, v = _adam_moments(grad, *slots, self.beta_1, self.beta_2)
        m_hat = m / (1.0 - tf.pow(self.beta_1, t))
        direction = m_hat / (tf.sqrt(v / (1.0 - tf.pow(self.beta_2, t))) + self.epsilon)
        ratio = _trust_ratio(tf.norm(value), tf.norm(direction))
        return value - ratio * lr * direction, [m, v]


class LionOptimizer(DecoupledOptimizer):
    """Lion (Chen et al. 2023), as keras.optimizers.Lion:
    var -= lr * sign(beta_1 m + (1 - beta_1) g);  m = beta_2 m + (1 - beta_2) g."""

    SLOTS = (('lion_momentum', 'Lion'),)

    def __init__(self, *, beta_1, beta_2, weight_decay, mask):
        super().__init__('Lion', weight_decay=weight_decay, mask=mask)
        self.beta_1, self.beta_2 = beta_1, beta_2

    def _update(self, var, value, grad, lr, slots, decays):
        (m,) = slots
        # 1 - beta in the variable's dtype, as Keras: a sign flips on the last bit.
        beta_1, beta_2 = (tf.cast(beta, var.dtype) for beta in (self.beta_1, self.beta_2))
        direction = tf.sign(m * beta_1 + grad * (1.0 - beta_1))
        return value - lr * direction, [m * beta_2 + grad * (1.0 - beta_2)]


class LarsOptimizer(DecoupledOptimizer):
    """LARS (You et al. 2017), as Model Garden's official/modeling/optimization/lars.py.

    grad += weight_decay_rate * var (decayed variables)
    classic:  v = momentum v + lr * trust * grad, trust = eeta |var| / |grad|
              var -= v (nesterov: momentum v + lr * trust * grad)
    else:     v = momentum v + grad; u = v (nesterov: momentum v + grad)
              var -= lr * eeta |var| / |u| * u
    Masked variables take neither the decay nor the trust ratio (which is then 1)."""

    SLOTS = (('lars_momentum', 'LARS'),)
    DECOUPLED = False

    def __init__(self, *, momentum, eeta, weight_decay_rate, nesterov, classic_momentum,
                 mask):
        super().__init__('LARS', weight_decay=weight_decay_rate, mask=mask)
        self.momentum, self.eeta = momentum, eeta
        self.nesterov, self.classic_momentum = nesterov, classic_momentum

    def _update(self, var, value, grad, lr, slots, decays):
        (v,) = slots
        if decays and self.weight_decay:
            grad = grad + self.weight_decay * value
        if self.classic_momentum:
            trust = (_trust_ratio(tf.norm(value), tf.norm(grad), self.eeta)
                     if decays else 1.0)
            scaled_lr = lr * trust
            next_v = self.momentum * v + scaled_lr * grad
            update = (self.momentum * next_v + scaled_lr * grad if self.nesterov
                      else next_v)
            return value - update, [next_v]
        next_v = self.momentum * v + grad
        update = self.momentum * next_v + grad if self.nesterov else next_v
        trust = _trust_ratio(tf.norm(value), tf.norm(update), self.eeta) if decays else 1.0
        return value - trust * lr * update, [next_v]


class MuonOptimizer(DecoupledOptimizer):
    """Muon (Jordan et al. 2024; Liu et al. 2025's RMS matching), as keras.optimizers.Muon.

    2-D variables (not embeddings, not exclude_layers) take Muon's step: m = momentum m +
    g; the (Nesterov) direction orthogonalised by ns_steps Newton-Schulz iterations,
    times sqrt(max(rows, columns)) * rms_rate; weight_decay decays them. The rest (conv
    kernels, biases, norms) take AdamW's step at lr * adam_lr_ratio, decayed by
    adam_weight_decay; only those have the velocity slot.
    """

    SLOTS = (('muon_momentum', 'Muon'), ('muon_velocity', 'Muon_1'))

    def __init__(self, *, momentum, ns_steps, nesterov, a, b, c, rms_rate, adam_beta_1,
                 adam_beta_2, epsilon, adam_lr_ratio, weight_decay, adam_weight_decay,
                 exclude_layers, exclude_embeddings, mask):
        """exclude_layers: regular expressions, comma-separated; rms_rate 0: off."""
        super().__init__('Muon', weight_decay=weight_decay, mask=mask)
        self.momentum, self.ns_steps, self.nesterov = momentum, ns_steps, nesterov
        self.coefficients, self.rms_rate = (a, b, c), rms_rate
        self.adam_beta_1, self.adam_beta_2, self.epsilon = adam_beta_1, adam_beta_2, epsilon
        self.adam_lr_ratio, self.adam_weight_decay = adam_lr_ratio, adam_weight_decay
        self.exclude_layers = tuple(pattern.strip() for pattern in exclude_layers.split(',')
                                    if pattern.strip())
        self.exclude_embeddings = exclude_embeddings

    def uses_adam(self, var) -> bool:
        name = slim_name(var)
        return (len(var.shape) != 2
                or (self.exclude_embeddings and 'embedding' in name.lower())
                or any(re.search(pattern, name) for pattern in self.exclude_layers))

    def _slots_for(self, var):
        return self.SLOTS if self.uses_adam(var) else self.SLOTS[:1]

    def _weight_decay_of(self, var):
        return self.adam_weight_decay if self.uses_adam(var) else self.weight_decay

    def _update(self, var, value, grad, lr, slots, decays):
        if self.uses_adam(var):
            return adam_update(value, grad, lr * self.adam_lr_ratio, slots,
                               self._step_count(var.dtype), self.adam_beta_1,
                               self.adam_beta_2, self.epsilon)
        (m,) = slots
        m = m + (grad + m * (self.momentum - 1))
        direction = grad + self.momentum * m if self.nesterov else m
        update = lr * newton_schulz(direction, self.ns_steps, self.coefficients)
        if self.rms_rate:
            update = update * math.sqrt(max(var.shape)) * self.rms_rate
        return value - update, [m]


def newton_schulz(matrix, steps, coefficients):
    """Muon's quintic Newton-Schulz iteration towards the orthogonal factor U V^T of
    `matrix` (2-D), on its wide orientation, after scaling to Frobenius norm <= 1."""
    a, b, c = coefficients
    tall = matrix.shape[0] > matrix.shape[1]
    x = tf.transpose(matrix) if tall else matrix
    x = x / (tf.norm(x) + 1e-7)
    for _ in range(steps):
        gram = tf.matmul(x, x, transpose_b=True)
        x = a * x + tf.matmul(b * gram + c * tf.matmul(gram, gram), x)
    return tf.transpose(x) if tall else x
