"""The layer kit: TF-Slim's layers as `tf.Module`s, with TF-Slim's variable names.

Every module is named by its path *relative* to the module that holds it ('conv1',
'Mixed_5b/Branch_1', or '' for no scope of its own, as NASNet's root-level cells).
Absolute scopes are resolved once, from the tree, when the outermost module is first
called; variables are then created under them from the input's static shape. So a
net declares each layer once, by its slim name, and nested blocks compose:

    class Block(layers.Module):
        def __init__(self):
            super().__init__('Mixed_5b')
            self.branch = layers.Sequential('Branch_1', [
                layers.Conv2D('Conv2d_0a_1x1', 48, 1), layers.Conv2D('Conv2d_0b_5x5', 64, 5)])

owns 'InceptionV3/Mixed_5b/Branch_1/Conv2d_0b_5x5/weights' inside a net 'InceptionV3'.

Computation runs in the input's dtype (float32, bfloat16, float16); variables stay
float32 and are cast on read; batch-norm parameters and statistics stay float32. What
slim spread with `arg_scope` is passed explicitly. L2 terms are read from the modules
(`regularization_losses()`), never collected into a global. `training` is a required
argument of every layer whose behaviour it can change.
"""
import contextlib
import dataclasses
import math
import re
from typing import Callable, Optional, Sequence, Union

import tensorflow as tf

Initializer = Callable[[Sequence[int], tf.DType], tf.Tensor]
Activation = Optional[Callable[[tf.Tensor], tf.Tensor]]
IntTuple = Union[int, Sequence[int]]


# --- Initialisers: (shape, dtype) -> tensor, the ones slim's nets use. ---

def zeros_initializer() -> Initializer:
    return lambda shape, dtype: tf.zeros(shape, dtype)


def ones_initializer() -> Initializer:
    return lambda shape, dtype: tf.ones(shape, dtype)


def constant_initializer(value: float) -> Initializer:
    return lambda shape, dtype: tf.fill(shape, tf.cast(value, dtype))


def truncated_normal_initializer(stddev: float) -> Initializer:
    """TF1's truncated normal: samples beyond 2 stddev redrawn, stddev not corrected."""
    return lambda shape, dtype: tf.random.truncated_normal(shape, stddev=stddev, dtype=dtype)


def xavier_initializer() -> Initializer:
    """Glorot uniform, slim's default for conv and fully_connected weights."""

    def initialize(shape, dtype):
        receptive_field = math.prod(shape[:-2]) if len(shape) > 2 else 1
        fan_in, fan_out = shape[-2] * receptive_field, shape[-1] * receptive_field
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return tf.random.uniform(shape, -limit, limit, dtype=dtype)

    return initialize


def variance_scaling_initializer(factor: float = 2.0, mode: str = 'FAN_IN',
                                 uniform: bool = False) -> Initializer:
    """TF1 contrib's variance_scaling_initializer (slim's Inception/ResNet default:
    factor 2, FAN_IN, a truncated normal of stddev sqrt(1.3 * factor / n))."""
    if mode not in ('FAN_IN', 'FAN_OUT', 'FAN_AVG'):
        raise ValueError(f"mode must be 'FAN_IN', 'FAN_OUT' or 'FAN_AVG', got {mode!r}.")

    def initialize(shape, dtype):
        receptive_field = math.prod(shape[:-2]) if len(shape) > 2 else 1
        fan_in = (shape[-2] if len(shape) > 1 else shape[-1]) * receptive_field
        fan_out = shape[-1] * receptive_field
        n = {'FAN_IN': fan_in, 'FAN_OUT': fan_out, 'FAN_AVG': (fan_in + fan_out) / 2}[mode]
        if uniform:
            limit = math.sqrt(3.0 * factor / n)
            return tf.random.uniform(shape, -limit, limit, dtype=dtype)
        return tf.random.truncated_normal(shape, stddev=math.sqrt(1.3 * factor / n),
                                          dtype=dtype)

    return initialize


def _tuple(value: IntTuple, rank: int) -> tuple:
    return (value,) * rank if isinstance(value, int) else tuple(value)


def _join(*parts: str) -> str:
    return '/'.join(part for part in parts if part)


def _read(variable, dtype):
    """A float32 variable's value in the compute dtype."""
    return variable if variable.dtype == dtype else tf.cast(variable, dtype)


# --- The module tree. ---

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
        scope = _join(parent_scope, self.relative_name)
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


class Sequential(Module):
    """Applies its layers in order under one scope (e.g. an Inception branch).

    Modules are called with `training`; plain functions (pools) with the tensor only.
    """

    def __init__(self, name: str, layers: Sequence[Callable]):
        super().__init__(name)
        self.layers = list(layers)

    def forward(self, inputs, training: bool):
        for layer in self.layers:
            inputs = (layer(inputs, training=training) if isinstance(layer, Module)
                      else layer(inputs))
        return inputs


# --- Batch norm. ---

@dataclasses.dataclass(frozen=True)
class BatchNormParams:
    """slim.batch_norm's settings; a net family passes one instead of an arg_scope."""
    decay: float = 0.999
    epsilon: float = 0.001
    center: bool = True
    scale: bool = False
    # slim's fused=False (the video nets): the moving variance averages the biased batch
    # variance; the fused kernel's is Bessel-corrected.
    fused: bool = True


class BatchNorm(Module):
    """slim.batch_norm: moving averages updated in training, used at inference.

    Parameters and statistics are float32 whatever the input's dtype (the fused kernel
    takes them so). Moving statistics are per replica (ON_READ, averaged when read).
    """

    def __init__(self, name: str = 'BatchNorm', params: BatchNormParams = BatchNormParams(),
                 activation: Activation = None):
        super().__init__(name)
        self.params = params
        self.activation = activation
        self.beta = self.gamma = self.moving_mean = self.moving_variance = None

    def _build(self, depth: int):
        p = self.params
        if p.center:
            self.beta = self._add_variable('beta', [depth], zeros_initializer())
        if p.scale:
            self.gamma = self._add_variable('gamma', [depth], ones_initializer())
        statistics = dict(trainable=False,
                          synchronization=tf.VariableSynchronization.ON_READ,
                          aggregation=tf.VariableAggregation.MEAN)
        self.moving_mean = self._add_variable(
            'moving_mean', [depth], zeros_initializer(), **statistics)
        self.moving_variance = self._add_variable(
            'moving_variance', [depth], ones_initializer(), **statistics)

    def forward(self, inputs, *, training: bool):
        depth = inputs.shape[-1]
        if self.moving_mean is None:
            self._build(depth)
        offset = self.beta if self.beta is not None else tf.zeros([depth])
        scale = self.gamma if self.gamma is not None else tf.ones([depth])
        # The fused kernel, as slim used by default: it normalises with the biased batch
        # variance but returns the Bessel-corrected one for the moving average. It wants
        # rank 4; folding the other axes into the batch keeps the per-channel statistics.
        as_4d = inputs if inputs.shape.rank == 4 else tf.reshape(inputs, [-1, 1, 1, depth])
        epsilon = max(self.params.epsilon, 1.001e-5)  # the kernel's minimum
        if training:
            outputs, batch_mean, batch_variance, _, _, _ = tf.raw_ops.FusedBatchNormV3(
                x=as_4d, scale=scale, offset=offset, mean=tf.constant([], tf.float32),
                variance=tf.constant([], tf.float32), epsilon=epsilon, is_training=True)
            if not self.params.fused:
                count = tf.cast(tf.size(as_4d) // depth, tf.float32)
                batch_variance *= (count - 1.0) / tf.maximum(count, 1.0)
            keep = 1.0 - self.params.decay
            self.moving_mean.assign_sub((self.moving_mean - batch_mean) * keep)
            self.moving_variance.assign_sub((self.moving_variance - batch_variance) * keep)
        else:
            outputs, *_ = tf.raw_ops.FusedBatchNormV3(
                x=as_4d, scale=scale, offset=offset, mean=self.moving_mean,
                variance=self.moving_variance, epsilon=epsilon, is_training=False)
        if inputs.shape.rank != 4:
            outputs = tf.reshape(outputs, tf.shape(inputs))
        return self.activation(outputs) if self.activation else outputs


# --- Layers with weights: conv (any rank), separable conv, fully connected. ---

class _WeightedLayer(Module):
    """Weights, then batch norm or biases, then the activation, as slim's layers."""

    # Set by nets.quantization.enable: fake quantization of the weights, and of the
    # outputs on their tracked range ('<layer>/act_quant/min', '.../max').
    quantization = None
    act_quant = None

    def __init__(self, name, *, activation, weights_initializer, biases_initializer,
                 weight_decay, normalizer, normalizer_name, biases_weight_decay=0.0):
        super().__init__(name)
        self.biases_weight_decay = biases_weight_decay
        self.activation = activation
        self.weights_initializer = weights_initializer
        self.biases_initializer = biases_initializer
        self.weight_decay = weight_decay
        self.batch_norm = (BatchNorm(normalizer_name, normalizer)
                           if normalizer is not None else None)
        self.biases = None
        self._built = False

    def _add_weights(self, name, shape):
        return self._add_variable(name, shape, self.weights_initializer,
                                  weight_decay=self.weight_decay)

    def _add_biases(self, depth):
        # As in slim, a normalised layer has no biases (batch norm's beta replaces them).
        if self.batch_norm is None and self.biases_initializer is not None:
            self.biases = self._add_variable('biases', [depth], self.biases_initializer,
                                             weight_decay=self.biases_weight_decay)

    def _read_weights(self, weights, dtype, per_channel=True):
        """The weights in the compute dtype, fake-quantized in quantization-aware nets."""
        if self.quantization is not None:
            weights = self.quantization.weights(weights, per_channel)
        return _read(weights, dtype)

    def _finish(self, outputs, training):
        if self.batch_norm is not None:
            outputs = self.batch_norm(outputs, training=training)
        elif self.biases is not None:
            outputs = tf.nn.bias_add(outputs, _read(self.biases, outputs.dtype))
        outputs = self.activation(outputs) if self.activation else outputs
        # After batch norm and activation: TFLite fuses them into the int8 kernel.
        return self.act_quant(outputs, training=training) if self.act_quant else outputs


_DEFAULTS = dict(activation=tf.nn.relu, weights_initializer=xavier_initializer(),
                 biases_initializer=zeros_initializer(), weight_decay=0.0, normalizer=None,
                 normalizer_name='BatchNorm')


def _pad(inputs, padding, kernel_size, rate):
    """(inputs, padding) for the convolution: 'EXPLICIT' becomes slim's fixed padding
    (what SAME pads for the dilated kernel at stride 1, split begin/end) then 'VALID'."""
    if padding != 'EXPLICIT':
        return inputs, padding
    pads = []
    for k, r in zip(kernel_size, rate):
        total = k + (k - 1) * (r - 1) - 1
        pads.append((total // 2, total - total // 2))
    return tf.pad(inputs, [(0, 0), *pads, (0, 0)]), 'VALID'


class ConvND(_WeightedLayer):
    """slim's conv2d/conv3d for any rank: SAME padding, ReLU, Xavier unless told otherwise.

    padding is 'SAME', 'VALID' or 'EXPLICIT': slim's fixed padding (ResNet's
    conv2d_same, MobileNet's use_explicit_padding), which pads as SAME would for a
    stride of 1, whatever the stride, and then convolves VALID.
    """

    rank = None  # set by the thin subclasses

    def __init__(self, name: str, num_outputs: int, kernel_size: IntTuple, *,
                 stride: IntTuple = 1, padding: str = 'SAME', rate: IntTuple = 1,
                 **options):
        super().__init__(name, **{**_DEFAULTS, **options})
        if padding not in ('SAME', 'VALID', 'EXPLICIT'):
            raise ValueError(f"padding must be 'SAME', 'VALID' or 'EXPLICIT', got {padding!r}.")
        self.num_outputs = num_outputs
        self.kernel_size = _tuple(kernel_size, self.rank)
        self.stride = _tuple(stride, self.rank)
        self.rate = _tuple(rate, self.rank)
        self.padding = padding

    def forward(self, inputs, *, training: bool):
        if not self._built:
            self.weights = self._add_weights(
                'weights', [*self.kernel_size, inputs.shape[-1], self.num_outputs])
            self._add_biases(self.num_outputs)
            self._built = True
        inputs, padding = _pad(inputs, self.padding, self.kernel_size, self.rate)
        as_matmul = self._covers_input(inputs, padding)
        # Per tensor as a matmul: TFLite's converter takes no per-channel MatMul weights.
        weights = self._read_weights(self.weights, inputs.dtype, per_channel=not as_matmul)
        if as_matmul:
            # A fully connected layer written as a conv (VGG's fc6-8, the 1x1 logits
            # on a pooled map): one matmul. oneDNN's conv of a 1x1 output computes the
            # same sums several times slower, mostly in the filter gradient.
            flat = tf.matmul(tf.reshape(inputs, [-1, math.prod(weights.shape[:-1])]),
                             tf.reshape(weights, [-1, self.num_outputs]))
            outputs = tf.reshape(flat, [-1, *[1] * self.rank, self.num_outputs])
        else:
            outputs = tf.nn.convolution(inputs, weights, strides=self.stride,
                                        padding=padding, dilations=self.rate)
        return self._finish(outputs, training)

    def _covers_input(self, inputs, padding):
        """Whether the kernel spans the whole (static) map, so the output is 1x1."""
        spatial = tuple(inputs.shape[1:-1])
        pointwise = all(k == 1 for k in self.kernel_size)
        return (spatial == self.kernel_size and all(r == 1 for r in self.rate)
                and (padding == 'VALID' or pointwise))


class Conv2D(ConvND):
    rank = 2


class Conv3D(ConvND):
    rank = 3


def conv2d_same(name: str, num_outputs: int, kernel_size: IntTuple, stride: int = 1,
                rate: int = 1, **options) -> Conv2D:
    """slim's resnet_utils.conv2d_same: SAME at stride 1, else explicit padding + VALID,
    so the output does not depend on the input's parity."""
    return Conv2D(name, num_outputs, kernel_size, stride=stride, rate=rate,
                  padding='SAME' if stride == 1 else 'EXPLICIT', **options)


class SeparableConv2D(_WeightedLayer):
    """slim.separable_conv2d: depthwise, then pointwise unless num_outputs is None."""

    def __init__(self, name: str, num_outputs: Optional[int], kernel_size: IntTuple, *,
                 depth_multiplier: int = 1, stride: IntTuple = 1, padding: str = 'SAME',
                 rate: IntTuple = 1, **options):
        super().__init__(name, **{**_DEFAULTS, **options})
        self.num_outputs = num_outputs
        self.kernel_size = _tuple(kernel_size, 2)
        self.depth_multiplier = depth_multiplier
        self.stride = _tuple(stride, 2)
        self.padding = padding
        self.rate = _tuple(rate, 2)
        self.pointwise_weights = None

    def forward(self, inputs, *, training: bool):
        in_depth = inputs.shape[-1]
        if not self._built:
            self.depthwise_weights = self._add_weights(
                'depthwise_weights', [*self.kernel_size, in_depth, self.depth_multiplier])
            if self.num_outputs is not None:
                self.pointwise_weights = self._add_weights(
                    'pointwise_weights',
                    [1, 1, in_depth * self.depth_multiplier, self.num_outputs])
            self._add_biases(self.num_outputs or in_depth * self.depth_multiplier)
            self._built = True
        inputs, padding = _pad(inputs, self.padding, self.kernel_size, self.rate)
        strides = (1, *self.stride, 1)
        # Per tensor: see nets.quantization.
        depthwise = self._read_weights(self.depthwise_weights, inputs.dtype,
                                       per_channel=False)
        if self.pointwise_weights is not None:
            outputs = tf.nn.separable_conv2d(
                inputs, depthwise, self._read_weights(self.pointwise_weights, inputs.dtype),
                strides=strides, padding=padding, dilations=self.rate)
        else:
            outputs = tf.nn.depthwise_conv2d(inputs, depthwise, strides=strides,
                                             padding=padding, dilations=self.rate)
        return self._finish(outputs, training)


class FullyConnected(_WeightedLayer):
    """slim.fully_connected: a dense layer on the last axis."""

    def __init__(self, name: str, num_outputs: int, **options):
        super().__init__(name, **{**_DEFAULTS, **options})
        self.num_outputs = num_outputs

    def forward(self, inputs, *, training: bool):
        if not self._built:
            self.weights = self._add_weights('weights', [inputs.shape[-1], self.num_outputs])
            self._add_biases(self.num_outputs)
            self._built = True
        weights = self._read_weights(self.weights, inputs.dtype, per_channel=False)
        outputs = (tf.matmul(inputs, weights) if inputs.shape.rank == 2
                   else tf.tensordot(inputs, weights, axes=1))
        return self._finish(outputs, training)


# --- Stateless layers (any compute dtype). ---

def max_pool(inputs, kernel_size: IntTuple, stride: IntTuple = 2, padding='VALID'):
    """slim's max_pool2d / max_pool3d, by the input's rank."""
    rank = inputs.shape.rank - 2
    return tf.nn.max_pool(inputs, _tuple(kernel_size, rank), _tuple(stride, rank), padding)


def avg_pool(inputs, kernel_size: IntTuple, stride: IntTuple = 2, padding='VALID'):
    """slim's avg_pool2d / avg_pool3d, by the input's rank."""
    rank = inputs.shape.rank - 2
    return tf.nn.avg_pool(inputs, _tuple(kernel_size, rank), _tuple(stride, rank), padding)


def flatten(inputs):
    """Keeps the batch dimension, folds the rest (static size kept when known)."""
    return tf.reshape(inputs, [-1, math.prod(inputs.shape[1:])])


# Generators the dropout masks are drawn from while a forward pass is traced (a stack).
_RANDOM_GENERATORS = []


@contextlib.contextmanager
def random_generator(generator: tf.random.Generator):
    """Dropout inside draws its masks from `generator` (stateless ops seeded by it), whose
    state a checkpoint holds, so a resumed run draws what an uninterrupted one would.
    The training loop sets it around the forward pass: no net has to pass it down.
    Outside, dropout uses TensorFlow's global seed."""
    _RANDOM_GENERATORS.append(generator)
    try:
        yield
    finally:
        _RANDOM_GENERATORS.pop()


def dropout(inputs, keep_prob: float, *, training: bool):
    if not training or keep_prob >= 1.0:
        return inputs
    if _RANDOM_GENERATORS:
        seed = _RANDOM_GENERATORS[-1].make_seeds(1)[:, 0]
        return tf.nn.experimental.stateless_dropout(inputs, rate=1.0 - keep_prob, seed=seed)
    return tf.nn.dropout(inputs, rate=1.0 - keep_prob)


def local_response_normalization(inputs, *, depth_radius, bias, alpha, beta):
    """tf.nn.local_response_normalization in any dtype (the CPU kernel lacks bfloat16)."""
    if inputs.dtype == tf.bfloat16:
        return tf.cast(local_response_normalization(
            tf.cast(inputs, tf.float32), depth_radius=depth_radius, bias=bias,
            alpha=alpha, beta=beta), tf.bfloat16)
    return tf.nn.local_response_normalization(inputs, depth_radius=depth_radius,
                                              bias=bias, alpha=alpha, beta=beta)
