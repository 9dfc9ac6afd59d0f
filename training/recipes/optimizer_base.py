"""The optimizers' base class: slots named and checkpointed by variable, the update
applied where each variable lives, global-norm clipping.

Subclasses list their slots and implement the per-variable update; training.recipes.
optimizers holds TF1's rules, training.recipes.decoupled_optimizers the modern ones.
"""
import re

import tensorflow as tf

from core.naming import slim_name

_PIECE = re.compile(r'/part_\d+$')  # a partitioned variable's piece


def constant(value, dtype):
    return tf.constant(value, dtype=dtype)


class Optimizer(tf.Module):
    """Base class: slot bookkeeping and the per-variable update.

    Subclasses list their slots in SLOTS as (slot key, name suffix) in TF1's creation
    order (_slots_for may give a variable fewer), and implement _apply_dense, which
    receives the variable's slots in that order.
    """

    SLOTS = ()
    # > 0: apply_gradients rescales the gradients so their global norm is at most this.
    clip_gradient_norm = 0.0
    # > 0: --layer_decay; the owner of the network sets learning_rate_scales from it.
    layer_decay = 0.0

    def __init__(self, name):
        super().__init__(name=name)
        # {variable name: {slot key: slot variable}}; keyed by name so checkpoints
        # do not depend on the order variables were built in.
        self._slots = {}
        # TF2 does not make variable names unique, so remember whose slots they are.
        self._slot_owners = {}
        # Variable name -> its learning-rate scale (layer decay); absent: 1.
        self.learning_rate_scales = {}

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
                for slot_key, suffix in self._slots_for(var):
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
            slots = list(self._slots[slim_name(var)].values())  # in SLOTS order
            self._apply_dense(var, grad, self._learning_rate_of(var, learning_rate), *slots)
        self._finish()
        return global_norm

    def _learning_rate_of(self, var, learning_rate):
        """learning_rate in var's dtype, times var's layer-decay scale if it has one (a
        partitioned variable's piece takes its whole's)."""
        rate = tf.cast(learning_rate, var.dtype)
        name = slim_name(var)
        scale = self.learning_rate_scales.get(
            name, self.learning_rate_scales.get(_PIECE.sub('', name), 1.0))
        return rate if scale == 1.0 else rate * tf.cast(scale, var.dtype)

    def _slots_for(self, var):
        """The (slot key, suffix) pairs `var` gets: all of SLOTS unless overridden."""
        del var
        return self.SLOTS

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
