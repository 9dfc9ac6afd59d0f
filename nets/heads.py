"""What the classifiers of several families share: pooling a feature map to 1x1, and
slim's convolutional classification head (Inception v1-v3, MobileNet v1-v3, the video
nets): the net's pool, dropout, a 1x1 conv to the classes, squeezed to [batch, classes].

The head's conv belongs to the net (an attribute of its own, as slim's
'Logits/Conv2d_1c_1x1'); the head only applies it.
"""
from typing import Callable, Dict, Optional, Tuple

import tensorflow as tf

from nets import layers


def reduced_kernel_size(inputs, kernel_size):
    """slim's _reduced_kernel_size_for_small_input: the kernel, capped by the map."""
    height, width = inputs.shape[1:3]
    if height is None or width is None:
        return list(kernel_size)
    return [min(height, kernel_size[0]), min(width, kernel_size[1])]


def whole_map_average(net):
    """An average over the whole feature map, a mean when its size is unknown:
    [batch, 1, 1, depth]."""
    kernel = net.shape[1:3]
    if kernel.is_fully_defined():
        return layers.avg_pool(net, kernel.as_list(), 2, 'VALID')
    return tf.reduce_mean(net, [1, 2], keepdims=True, name='global_pool')


def conv_classifier(features, logits_layer: Optional[Callable],
                    end_points: Dict[str, tf.Tensor], *,
                    pool: Callable[[tf.Tensor], Tuple[Optional[str], tf.Tensor]],
                    dropout_keep_prob: float, training: bool,
                    random_generator: Optional[tf.random.Generator] = None,
                    spatial_squeeze: bool = True, pre_logits: bool = False) -> tf.Tensor:
    """slim's head on a feature map, its ops under 'Logits' (e.g. 'InceptionV2/Logits/
    AvgPool_1a_7x7'): `pool(features)` gives (end point or None, [batch, 1, 1, depth]);
    without a `logits_layer` (num_classes=0) the pooled features are returned. Else
    dropout (its output the end point 'PreLogits' if asked), `logits_layer(net,
    training=...)` (the net's 1x1 conv, or a callable around it), squeezed to
    [batch, classes] unless told not to; records 'Logits' and 'Predictions' (softmax)
    and returns the logits."""
    with tf.name_scope('Logits'):
        name, net = pool(features)
        if name:
            end_points[name] = net
        if logits_layer is None:
            return net
        net = layers.dropout(net, dropout_keep_prob, training=training,
                             random_generator=random_generator)
        if pre_logits:
            end_points['PreLogits'] = net
        logits = logits_layer(net, training=training)
        if spatial_squeeze:
            logits = tf.squeeze(logits, [1, 2], name='SpatialSqueeze')
    end_points['Logits'] = logits
    end_points['Predictions'] = tf.nn.softmax(logits, name='Predictions')
    return logits
