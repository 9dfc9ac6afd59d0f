"""The network EfficientNet and EfficientNetV2 share: a 3x3 stride-2 stem, stages of
(fused) MBConv blocks, a 1x1 head convolution, global average pooling, dropout and a
dense classifier, with the official releases' variable names:

    <scope>/stem/conv2d/kernel, <scope>/stem/tpu_batch_normalization/{gamma,beta,...}
    <scope>/blocks_<i>/...            (nets/efficientnet/blocks.py)
    <scope>/head/conv2d/kernel, <scope>/head/tpu_batch_normalization/...
    <scope>/head/dense/{kernel,bias}

End points, as the releases': 'stem'; 'block_<i>' and 'block_<i>/expansion_output' for
each block; 'reduction_<j>' (and '/expansion_output') for the last block at each
resolution (j = 1..5: strides 2, 4, 8, 16, 32); 'features' (the last block, the
releases' `build_model_base`); 'head_1x1' (after the head convolution: `base()`'s
default); then slim's head: 'global_pool' [batch, 1, 1, depth], 'Logits', 'Predictions'.

Drop-connect as the releases schedule it: block i of all n (from 0, counting the blocks
without a residual) drops its residual branch per example, in training, with
probability drop_path_rate * i / n.
"""
from typing import Callable, Sequence

import tensorflow as tf

from nets import heads, layers
from nets.efficientnet import blocks
from nets.efficientnet.blocks import BATCH_NORM_NAME, Stage
from nets.network import EndPoints, Network


class EfficientNet(Network):
    """An EfficientNet from a block table (`stages`) and its scaling. `round_filters`
    maps an unscaled depth to the net's (the width coefficient and the release's
    rounding); `depth` multiplies the repeats. `weight_decay` reaches every kernel, and
    the biases too when `decay_biases` (EfficientNet's recipe; V2's excludes them)."""

    default_final_endpoint = 'head_1x1'
    random_in_base = True  # drop-connect's masks

    def __init__(self, num_classes: int, *, stages: Sequence[Stage],
                 round_filters: Callable[[int], int], depth: float, scope: str,
                 batch_norm: layers.BatchNormParams, weight_decay: float = 1e-5,
                 decay_biases: bool = True, is_training: bool = False,
                 dropout_keep_prob: float = 0.8, drop_path_rate: float = 0.2,
                 head_filters: int = 1280, activation: Callable = tf.nn.silu,
                 spec=None, quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        if not 0.0 <= drop_path_rate < 1.0:
            raise ValueError(f'drop_path_rate must be in [0, 1), got {drop_path_rate!r}.')
        self.dropout_keep_prob = dropout_keep_prob
        options = dict(normalizer=batch_norm, weights_initializer=blocks.conv_kernel_initializer(),
                       weight_decay=weight_decay,
                       biases_weight_decay=weight_decay if decay_biases else 0.0,
                       quantization=self.quantization, naming='keras')
        self.stem = layers.Conv2D('stem/conv2d', round_filters(stages[0].input_filters), 3,
                                  stride=2, activation=activation,
                                  normalizer_name=BATCH_NORM_NAME, **options)
        self.blocks = []
        for stage in stages:
            input_filters = round_filters(stage.input_filters)
            output_filters = round_filters(stage.output_filters)
            for repeat in range(blocks.round_repeats(stage.repeats, depth)):
                self.blocks.append(blocks.MBConv(
                    f'blocks_{len(self.blocks)}',
                    input_filters=input_filters if repeat == 0 else output_filters,
                    output_filters=output_filters, expansion=stage.expansion,
                    kernel_size=stage.kernel_size, stride=stage.stride if repeat == 0 else 1,
                    se_ratio=stage.se_ratio, fused=stage.fused, activation=activation,
                    options=options))
        for index, block in enumerate(self.blocks):
            block.drop_path_rate = drop_path_rate * index / len(self.blocks)
        # A block ends a resolution if it is the last, or the next one strides.
        self._reduction_ends = {
            index for index, block in enumerate(self.blocks)
            if index == len(self.blocks) - 1 or self.blocks[index + 1].stride > 1}
        self.head = layers.Conv2D('head/conv2d', round_filters(head_filters), 1,
                                  activation=activation, normalizer_name=BATCH_NORM_NAME,
                                  **options)
        self.logits = None
        if num_classes:
            self.logits = layers.FullyConnected(
                'head/dense', num_classes, activation=None,
                **{**options, 'normalizer': None,
                   'weights_initializer': blocks.dense_kernel_initializer()})

    def forward_base(self, images, *, final_endpoint, training, random_generator=None):
        end_points = EndPoints(final_endpoint)
        net = self.stem(images, training=training)
        if end_points.add('stem', net):
            return net, end_points
        reduction = 0
        for index, block in enumerate(self.blocks):
            net, expansion_output = block(net, training=training,
                                          random_generator=random_generator)
            names = [f'block_{index}']
            if index in self._reduction_ends:
                reduction += 1
                names.append(f'reduction_{reduction}')
            for name in names:
                end_points[f'{name}/expansion_output'] = expansion_output
                if end_points.add(name, net):
                    return net, end_points
        if end_points.add('features', net):
            return net, end_points
        net = self.head(net, training=training)
        if end_points.add('head_1x1', net):
            return net, end_points
        raise end_points.unknown_final_endpoint()

    def forward(self, images, *, training, random_generator=None):
        net, end_points = self.forward_base(
            images, final_endpoint=self.default_final_endpoint, training=training,
            random_generator=random_generator)
        logits = None
        if self.logits is not None:
            logits = lambda pooled, training: self.logits(  # noqa: E731
                tf.squeeze(pooled, [1, 2]), training=training)
        output = heads.conv_classifier(
            net, logits, end_points,
            pool=lambda features: ('global_pool', tf.reduce_mean(
                features, [1, 2], keepdims=True, name='global_pool')),
            dropout_keep_prob=self.dropout_keep_prob, training=training,
            random_generator=random_generator, spatial_squeeze=False)
        return output, end_points
