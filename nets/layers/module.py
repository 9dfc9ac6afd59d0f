"""The module tree of the layer kit: relative names resolved to TF-Slim's scopes, and the
L2 terms of weight decay read from the modules."""
import re
from typing import Callable, Sequence

import tensorflow as tf


def join_scope(*parts: str) -> str:
    return '/'.join(part for part in parts if part)


class Module(tf.Module):
    """A node of a net: named relative to its parent, resolved to a slim scope on use.

    Subclasses implement `forward`; calling a module resolves the scopes of its whole
    tree first if it is the outermost one called.
    """

    def __init__(self, name: str):
        # tf.Module wants an identifier; the slim path is kept in relative_name.
        identifier = re.sub(r'\W', '_', name) or 'root'
        super().__init__(name=identifier if not identifier[0].isdigit() else '_' + identifier)
        self.relative_name = name
        self._scope = None
        # Variable name -> L2 scale. Names, not variables, so checkpoints see each
        # variable once, under its attribute.
        self._weight_decay_by_name = {}

    @property
    def scope(self) -> str:
        """The absolute slim scope, e.g. 'InceptionV3/Mixed_5b/Branch_1'."""
        if self._scope is None:
            self.resolve_scopes()
        return self._scope

    def resolve_scopes(self, parent_scope: str = ''):
        """Sets this module's scope under `parent_scope`, and its descendants' under it."""
        scope = join_scope(parent_scope, self.relative_name)
        if self._scope not in (None, scope) and self._own_variables():
            raise ValueError(f'Module {self._scope!r} was used on its own before its parent '
                             f'{parent_scope!r}; call the outermost module first.')
        self._scope = scope
        for child in self._children():
            child.resolve_scopes(scope)

    def _children(self):
        return self._flatten(recursive=False, predicate=lambda m: isinstance(m, Module))

    def _own_variables(self):
        return self._flatten(recursive=False, predicate=lambda v: isinstance(v, tf.Variable))

    def __call__(self, *args, **kwargs):
        if self._scope is None:
            self.resolve_scopes()
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def _add_variable(self, name, shape, initializer, *, trainable=True, weight_decay=0.0,
                      **variable_kwargs):
        """A float32 variable '<scope>/<name>', created whatever scope the caller is in."""
        # A trailing '/' re-enters the absolute scope; '' is the root scope. Made
        # eagerly even while a tf.function traces: there, every variable would get an
        # initialising cond in the graph (6x slower to trace a 1000-variable net).
        with tf.init_scope(), tf.name_scope(self.scope + '/' if self.scope else ''):
            variable = tf.Variable(initializer(list(shape), tf.float32), name=name,
                                   trainable=trainable, **variable_kwargs)
        if weight_decay:
            self._weight_decay_by_name[variable.name] = weight_decay
        return variable

    def regularization_losses(self):
        """slim's l2_regularizer terms, scale * sum(w**2) / 2, of this module's tree."""
        modules = [self, *self._flatten(predicate=lambda m: isinstance(m, Module))]
        return [tf.multiply(module._weight_decay_by_name[v.name], tf.nn.l2_loss(v),
                            name='l2_loss')
                for module in modules for v in module._own_variables()
                if v.name in module._weight_decay_by_name]


def apply(layer: Callable, inputs, *, training: bool):
    """Calls a module with `training`, a plain function (a pool, an activation) without."""
    return layer(inputs, training=training) if isinstance(layer, Module) else layer(inputs)


class Sequential(Module):
    """Applies its layers in order under one scope (e.g. an Inception branch).

    Modules are called with `training`; plain functions (pools) with the tensor only.
    """

    def __init__(self, name: str, layers: Sequence[Callable]):
        super().__init__(name)
        self.layers = list(layers)

    def forward(self, inputs, training: bool):
        for layer in self.layers:
            inputs = apply(layer, inputs, training=training)
        return inputs
