"""The layer kit: TF-Slim's layers as `tf.Module`s, with TF-Slim's variable names.

Each layer is given its full slim scope (e.g. 'CifarNet/conv1') and creates its
variables under it on the first call, from the input's static shape, so a layer named
'CifarNet/conv1' owns 'CifarNet/conv1/weights' and 'CifarNet/conv1/biases' exactly as
TF-Slim did. What slim spread with `arg_scope` (initialisers, weight decay, activation,
batch-norm settings) is passed explicitly. Regularisation terms are read from the
layers (`regularization_losses()`), never collected into a global.
"""
import dataclasses
import math
from typing import Callable, Optional, Sequence, Union

import tensorflow as tf

Initializer = Callable[[Sequence[int], tf.DType], tf.Tensor]
Activation = Optional[Callable[[tf.Tensor], tf.Tensor]]
IntPair = Union[int, Sequence[int]]


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
    """Glorot uniform, slim's default for conv2d and fully_connected weights."""

    def initialize(shape, dtype):
        receptive_field = math.prod(shape[:-2]) if len(shape) > 2 else 1
        fan_in, fan_out = shape[-2] * receptive_field, shape[-1] * receptive_field
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return tf.random.uniform(shape, -limit, limit, dtype=dtype)

    return initialize


def _pair(value: IntPair) -> tuple:
    return (value, value) if isinstance(value, int) else tuple(value)


@dataclasses.dataclass(frozen=True)
class BatchNormParams:
    """slim.batch_norm's settings; a net family passes one instead of an arg_scope."""
    decay: float = 0.999
    epsilon: float = 0.001
    center: bool = True
    scale: bool = False


def _is_variable(value):
    return isinstance(value, tf.Variable)


class Layer(tf.Module):
    """A module whose variables live under an absolute slim scope."""

    def __init__(self, scope: str):
        super().__init__(name=scope.replace('/', '_'))
        self.scope = scope
        # Variable name -> L2 scale. Names, not variables, so checkpoints see each
        # variable once, under its attribute.
        self._weight_decay_by_name = {}

    def _add_variable(self, name, shape, initializer, *, dtype=tf.float32,
                      trainable=True, weight_decay=0.0, **variable_kwargs):
        # The trailing '/' makes the scope absolute, whatever scope the caller is in.
        with tf.name_scope(self.scope + '/'):
            variable = tf.Variable(
                initializer(list(shape), dtype), name=name, trainable=trainable,
                **variable_kwargs)
        if weight_decay:
            self._weight_decay_by_name[variable.name] = weight_decay
        return variable

    def regularization_losses(self):
        """slim's l2_regularizer terms: scale * sum(w**2) / 2, one per decayed weight."""
        return [tf.multiply(self._weight_decay_by_name[v.name], tf.nn.l2_loss(v),
                            name='l2_loss')
                for v in self._flatten(recursive=False, predicate=_is_variable)
                if v.name in self._weight_decay_by_name]


class BatchNorm(Layer):
    """slim.batch_norm: moving averages updated in training, used at inference."""

    def __init__(self, scope: str, params: BatchNormParams = BatchNormParams(),
                 activation: Activation = None):
        super().__init__(scope)
        self.params = params
        self.activation = activation
        self._built = False

    def _build(self, depth: int):
        p = self.params
        self.beta = (self._add_variable('beta', [depth], zeros_initializer())
                     if p.center else None)
        self.gamma = (self._add_variable('gamma', [depth], ones_initializer())
                      if p.scale else None)
        # Each replica keeps its own statistics; reading them averages the replicas.
        stat_kwargs = dict(trainable=False,
                           synchronization=tf.VariableSynchronization.ON_READ,
                           aggregation=tf.VariableAggregation.MEAN)
        self.moving_mean = self._add_variable(
            'moving_mean', [depth], zeros_initializer(), **stat_kwargs)
        self.moving_variance = self._add_variable(
            'moving_variance', [depth], ones_initializer(), **stat_kwargs)
        self._built = True

    def __call__(self, inputs, training: bool):
        depth = inputs.shape[-1]
        if not self._built:
            self._build(depth)
        offset = self.beta if self.beta is not None else tf.zeros([depth], inputs.dtype)
        scale = self.gamma if self.gamma is not None else tf.ones([depth], inputs.dtype)
        # The fused kernel, as slim used by default: it normalises with the biased batch
        # variance but returns the Bessel-corrected one for the moving average.
        as_4d = inputs if inputs.shape.rank == 4 else inputs[:, tf.newaxis, tf.newaxis, :]
        epsilon = max(self.params.epsilon, 1.001e-5)
        if training:
            outputs, batch_mean, batch_variance, _, _, _ = tf.raw_ops.FusedBatchNormV3(
                x=as_4d, scale=scale, offset=offset, mean=tf.constant([], inputs.dtype),
                variance=tf.constant([], inputs.dtype), epsilon=epsilon,
                is_training=True)
            decay = 1.0 - self.params.decay
            self.moving_mean.assign_sub((self.moving_mean - batch_mean) * decay)
            self.moving_variance.assign_sub((self.moving_variance - batch_variance) * decay)
        else:
            outputs, *_ = tf.raw_ops.FusedBatchNormV3(
                x=as_4d, scale=scale, offset=offset, mean=self.moving_mean,
                variance=self.moving_variance, epsilon=epsilon, is_training=False)
        if inputs.shape.rank != 4:
            outputs = tf.reshape(outputs, tf.shape(inputs))
        return self.activation(outputs) if self.activation else outputs


class _WeightedLayer(Layer):
    """Shared by conv and fully-connected layers: weights, then biases or batch norm."""

    def __init__(self, scope, *, activation, weights_initializer, biases_initializer,
                 weight_decay, normalizer):
        super().__init__(scope)
        self.activation = activation
        self.weights_initializer = weights_initializer
        self.biases_initializer = biases_initializer
        self.weight_decay = weight_decay
        self.batch_norm = (BatchNorm(scope + '/BatchNorm', normalizer)
                           if normalizer is not None else None)
        self.biases = None
        self._built = False

    def _add_biases(self, depth):
        # As in slim, a normalised layer has no biases (batch norm's beta replaces them).
        if self.batch_norm is None and self.biases_initializer is not None:
            self.biases = self._add_variable('biases', [depth], self.biases_initializer)

    def _finish(self, outputs, training):
        if self.batch_norm is not None:
            outputs = self.batch_norm(outputs, training=training)
        elif self.biases is not None:
            outputs = tf.nn.bias_add(outputs, self.biases)
        return self.activation(outputs) if self.activation else outputs


class Conv2D(_WeightedLayer):
    """slim.conv2d: SAME padding, ReLU and Xavier weights unless told otherwise."""

    def __init__(self, scope: str, num_outputs: int, kernel_size: IntPair, *,
                 stride: IntPair = 1, padding: str = 'SAME', rate: IntPair = 1,
                 activation: Activation = tf.nn.relu,
                 weights_initializer: Initializer = xavier_initializer(),
                 biases_initializer: Optional[Initializer] = zeros_initializer(),
                 weight_decay: float = 0.0,
                 normalizer: Optional[BatchNormParams] = None):
        super().__init__(scope, activation=activation,
                         weights_initializer=weights_initializer,
                         biases_initializer=biases_initializer,
                         weight_decay=weight_decay, normalizer=normalizer)
        self.num_outputs = num_outputs
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = padding
        self.rate = _pair(rate)

    def __call__(self, inputs, training: bool = False):
        if not self._built:
            self.weights = self._add_variable(
                'weights', [*self.kernel_size, inputs.shape[-1], self.num_outputs],
                self.weights_initializer, weight_decay=self.weight_decay)
            self._add_biases(self.num_outputs)
            self._built = True
        outputs = tf.nn.conv2d(inputs, self.weights, strides=self.stride,
                               padding=self.padding, dilations=self.rate)
        return self._finish(outputs, training)


class SeparableConv2D(_WeightedLayer):
    """slim.separable_conv2d: depthwise, then pointwise unless num_outputs is None."""

    def __init__(self, scope: str, num_outputs: Optional[int], kernel_size: IntPair, *,
                 depth_multiplier: int = 1, stride: IntPair = 1, padding: str = 'SAME',
                 rate: IntPair = 1, activation: Activation = tf.nn.relu,
                 weights_initializer: Initializer = xavier_initializer(),
                 biases_initializer: Optional[Initializer] = zeros_initializer(),
                 weight_decay: float = 0.0,
                 normalizer: Optional[BatchNormParams] = None):
        super().__init__(scope, activation=activation,
                         weights_initializer=weights_initializer,
                         biases_initializer=biases_initializer,
                         weight_decay=weight_decay, normalizer=normalizer)
        self.num_outputs = num_outputs
        self.kernel_size = _pair(kernel_size)
        self.depth_multiplier = depth_multiplier
        self.stride = _pair(stride)
        self.padding = padding
        self.rate = _pair(rate)
        self.pointwise_weights = None

    def __call__(self, inputs, training: bool = False):
        in_depth = inputs.shape[-1]
        if not self._built:
            self.depthwise_weights = self._add_variable(
                'depthwise_weights', [*self.kernel_size, in_depth, self.depth_multiplier],
                self.weights_initializer, weight_decay=self.weight_decay)
            if self.num_outputs is not None:
                self.pointwise_weights = self._add_variable(
                    'pointwise_weights',
                    [1, 1, in_depth * self.depth_multiplier, self.num_outputs],
                    self.weights_initializer, weight_decay=self.weight_decay)
            self._add_biases(self.num_outputs or in_depth * self.depth_multiplier)
            self._built = True
        strides = (1, *self.stride, 1)
        if self.pointwise_weights is not None:
            outputs = tf.nn.separable_conv2d(
                inputs, self.depthwise_weights, self.pointwise_weights, strides=strides,
                padding=self.padding, dilations=self.rate)
        else:
            outputs = tf.nn.depthwise_conv2d(
                inputs, self.depthwise_weights, strides=strides, padding=self.padding,
                dilations=self.rate)
        return self._finish(outputs, training)


class FullyConnected(_WeightedLayer):
    """slim.fully_connected on a rank-2 input."""

    def __init__(self, scope: str, num_outputs: int, *,
                 activation: Activation = tf.nn.relu,
                 weights_initializer: Initializer = xavier_initializer(),
                 biases_initializer: Optional[Initializer] = zeros_initializer(),
                 weight_decay: float = 0.0,
                 normalizer: Optional[BatchNormParams] = None):
        super().__init__(scope, activation=activation,
                         weights_initializer=weights_initializer,
                         biases_initializer=biases_initializer,
                         weight_decay=weight_decay, normalizer=normalizer)
        self.num_outputs = num_outputs

    def __call__(self, inputs, training: bool = False):
        if not self._built:
            self.weights = self._add_variable(
                'weights', [inputs.shape[-1], self.num_outputs],
                self.weights_initializer, weight_decay=self.weight_decay)
            self._add_biases(self.num_outputs)
            self._built = True
        return self._finish(tf.matmul(inputs, self.weights), training)


# --- Stateless layers. ---

def max_pool2d(inputs, kernel_size: IntPair, stride: IntPair = 2, padding='VALID'):
    return tf.nn.max_pool2d(inputs, _pair(kernel_size), _pair(stride), padding)


def avg_pool2d(inputs, kernel_size: IntPair, stride: IntPair = 2, padding='VALID'):
    return tf.nn.avg_pool2d(inputs, _pair(kernel_size), _pair(stride), padding)


def flatten(inputs):
    """Keeps the batch dimension, folds the rest (static size kept when known)."""
    return tf.reshape(inputs, [-1, math.prod(inputs.shape[1:])])


def dropout(inputs, keep_prob: float, training: bool):
    if not training or keep_prob >= 1.0:
        return inputs
    return tf.nn.dropout(inputs, rate=1.0 - keep_prob)
