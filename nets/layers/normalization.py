"""Normalisation layers: slim.batch_norm, layer normalisation, global response
normalisation, and local response normalisation."""
import dataclasses

import tensorflow as tf

from nets.layers.initializers import ones_initializer, zeros_initializer
from nets.layers.module import Module


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
    takes them so). Moving statistics are per replica (ON_READ) and read as the first
    replica's, as TF-Slim's clones ran clone 0's update ops only: a read (a checkpoint
    save) needs no cross-replica reduction, which under multi-worker all-reduce only
    the saving chief would run. (The trainer makes every copy their mean after each
    update: training.loop.model_step.share_replica_statistics.)
    """

    def __init__(self, name: str = 'BatchNorm', params: BatchNormParams = BatchNormParams(),
                 activation=None):
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
                          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
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


class LayerNorm(Module):
    """Layer normalisation (Ba et al. 2016, arXiv 1607.06450) over the last axis: each
    position's channels to zero mean and unit variance, then `gamma * x + beta` per
    channel. Its variables are '<scope>/gamma' (ones) and '<scope>/beta' (zeros), as
    slim's layer_norm and Keras's LayerNormalization name them.

    Mean and variance (the biased one) are computed in float32 whatever the input's
    dtype, and so is the normalised value; the result is cast back to the input's
    dtype. It has no moving statistics, so training and inference compute the same.
    """

    def __init__(self, name: str = 'LayerNorm', *, epsilon: float = 1e-6,
                 center: bool = True, scale: bool = True):
        super().__init__(name)
        self.epsilon = epsilon
        self.center, self.scale = center, scale
        self.beta = self.gamma = None
        self._built = False

    def forward(self, inputs, *, training: bool = False):  # pylint: disable=unused-argument
        depth = inputs.shape[-1]
        if not self._built:
            if self.scale:
                self.gamma = self._add_variable('gamma', [depth], ones_initializer())
            if self.center:
                self.beta = self._add_variable('beta', [depth], zeros_initializer())
            self._built = True
        values = tf.cast(inputs, tf.float32)
        mean, variance = tf.nn.moments(values, axes=[-1], keepdims=True)
        outputs = tf.nn.batch_normalization(values, mean, variance, offset=self.beta,
                                            scale=self.gamma,
                                            variance_epsilon=self.epsilon)
        return tf.cast(outputs, inputs.dtype)


class GlobalResponseNorm(Module):
    """Global response normalisation (ConvNeXt V2, Woo et al. 2023, arXiv 2301.00808) of
    a [batch, height, width, channels] map: each channel's L2 norm over the map, divided
    by the mean of those norms over the channels (plus epsilon), scales the input;
    `x + gamma * (x * scale) + beta`. Variables '<scope>/gamma' and '<scope>/beta'
    start at zeros, so the layer starts as the identity (as the release's).

    The norms are computed in float32 whatever the input's dtype (a sum of squares over
    the map loses too much in bfloat16); the result is cast back.
    """

    def __init__(self, name: str = 'global_response_norm', *, epsilon: float = 1e-6):
        super().__init__(name)
        self.epsilon = epsilon
        self.gamma = self.beta = None

    def forward(self, inputs, *, training: bool = False):  # pylint: disable=unused-argument
        depth = inputs.shape[-1]
        if self.gamma is None:
            self.gamma = self._add_variable('gamma', [depth], zeros_initializer())
            self.beta = self._add_variable('beta', [depth], zeros_initializer())
        values = tf.cast(inputs, tf.float32)
        norms = tf.sqrt(tf.reduce_sum(tf.square(values), axis=[1, 2], keepdims=True))
        scale = norms / (tf.reduce_mean(norms, axis=-1, keepdims=True) + self.epsilon)
        return tf.cast(values + self.gamma * (values * scale) + self.beta, inputs.dtype)


def local_response_normalization(inputs, *, depth_radius, bias, alpha, beta):
    """tf.nn.local_response_normalization in any dtype (the CPU kernel lacks bfloat16)."""
    if inputs.dtype == tf.bfloat16:
        return tf.cast(local_response_normalization(
            tf.cast(inputs, tf.float32), depth_radius=depth_radius, bias=bias,
            alpha=alpha, beta=beta), tf.bfloat16)
    return tf.nn.local_response_normalization(inputs, depth_radius=depth_radius,
                                              bias=bias, alpha=alpha, beta=beta)
