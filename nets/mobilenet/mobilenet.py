"""The generic MobileNet of TF-Slim's `nets/mobilenet/mobilenet.py`: a network built from
a conv-defs description (one entry per layer), with slim's depth multiplier, output
stride, explicit padding and classification head.

A description (`ConvDefs`) is data: a tuple of `Conv`, `ExpandedConv` and `AvgPoolTo1x1`
layers (the records of nets/conv_defs.py) and the default activation. Layer i (from 1)
is the end point 'layer_i'; expanded convs add 'layer_i/expansion_output',
'layer_i/depthwise_output' and 'layer_i/output'. The head average-pools to 1x1
('global_pool'), then applies slim's conv classifier (nets/heads.py): dropout and a 1x1
conv with biases ('Logits/Conv2d_1c_1x1'), squeezed to [batch, classes].

slim's quirks reproduced:
- depths are `make_divisible(depth * multiplier, divisible_by, min_depth)`; expansions
  follow the (multiplied) input depth, rounded to a multiple of 8 independently of
  `divisible_by`;
- `finegrain_classification_mode` keeps the last layer wide: V3 leaves its depth
  unmultiplied, V2 divides it by a multiplier below 1 before multiplying;
- with `output_stride`, once the stride is reached further strides become dilation rates
  (nets/atrous.py); 1x1 convolutions never dilate;
- the training scope (`mobilenet.training_scope`): weights truncated_normal(0.09), L2
  weight decay on conv2d weights only (depthwise weights and biases are not decayed),
  batch norm decay 0.997, epsilon 0.001, center and scale; dropout keep 0.8.

`drop_path_rate` adds stochastic depth (not in slim): in training, the i-th of the n
expanded convs that have a residual (from 0, in forward order) drops its projection per
example with probability drop_path_rate * i / (n - 1) before the add
(layers.drop_path_rates); nothing changes at evaluation or at rate 0.
"""
import dataclasses
from typing import Callable, Optional, Tuple, Union

from nets import heads, layers
from nets.atrous import AtrousSchedule
from nets.conv_defs import AvgPoolTo1x1, Conv, ExpandedConv
from nets.mobilenet import conv_blocks
from nets.network import EndPoints, Network

Layer = Union[Conv, ExpandedConv, AvgPoolTo1x1]


@dataclasses.dataclass(frozen=True)
class ConvDefs:
    """An architecture: its layers and the activation of layers that name none.

    `finegrain` says how finegrain_classification_mode keeps the last layer wide:
    'unmultiplied' (V3) or 'undo_shrinking' (V2: divided by a multiplier below 1).
    """
    layers: Tuple[Layer, ...]
    activation: Callable
    finegrain: str = 'unmultiplied'


def _reduce_to_1x1(inputs, default_size):
    height, width = inputs.shape[1:3]
    size = height if height is not None and height == width else default_size
    return layers.avg_pool(inputs, size, 1, 'VALID')


# slim's mobilenet training_scope(bn_decay=0.997): batch norm after every conv.
BATCH_NORM = layers.BatchNormParams(decay=0.997, epsilon=0.001, center=True, scale=True)


class MobileNet(Network):
    """A MobileNet built from `conv_defs`; `base(final_endpoint=...)` is slim's
    `mobilenet_base` (default: the last layer)."""

    random_in_base = True  # drop-path's masks

    def __init__(self, conv_defs: ConvDefs, num_classes: int = 1001, *,
                 weight_decay: float = 0.00004, is_training: bool = False,
                 depth_multiplier: float = 1.0, min_depth: int = 8, divisible_by: int = 8,
                 finegrain_classification_mode: bool = False,
                 output_stride: Optional[int] = None, use_explicit_padding: bool = False,
                 dropout_keep_prob: float = 0.8, spatial_squeeze: bool = True,
                 stddev: float = 0.09, drop_path_rate: float = 0.0,
                 batch_norm: layers.BatchNormParams = BATCH_NORM, scope: str = 'Mobilenet',
                 spec=None, quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        if depth_multiplier <= 0:
            raise ValueError('depth_multiplier is not greater than zero.')
        if output_stride is not None and (
                output_stride == 0 or (output_stride > 1 and output_stride % 2)):
            raise ValueError('Output stride must be None, 1 or a multiple of 2.')
        if conv_defs.finegrain not in ('unmultiplied', 'undo_shrinking'):
            raise ValueError(f'Unknown finegrain mode {conv_defs.finegrain!r}.')
        self.dropout_keep_prob = dropout_keep_prob
        self.spatial_squeeze = spatial_squeeze
        self.default_final_endpoint = f'layer_{len(conv_defs.layers)}'
        initializer = (layers.truncated_normal_initializer(stddev) if stddev >= 0
                       else layers.xavier_initializer())
        conv_options = dict(
            weights_initializer=initializer, weight_decay=weight_decay,
            normalizer=batch_norm,
            quantization=self.quantization)
        padding = 'EXPLICIT' if use_explicit_padding else 'SAME'

        def multiplied(depth, is_last):
            if finegrain_classification_mode and is_last:
                if conv_defs.finegrain == 'unmultiplied':
                    return depth
                if depth_multiplier < 1:
                    depth /= depth_multiplier
            return conv_blocks.make_divisible(depth * depth_multiplier, divisible_by,
                                              min_depth)

        self.base_layers = []
        counts = {}
        depth = None  # the input's depth is known only when called
        schedule = AtrousSchedule(output_stride)  # past it, strides dilate (nets/atrous.py)
        for index, spec in enumerate(conv_defs.layers):
            layer_stride, layer_rate = schedule.place(getattr(spec, 'stride', 1))
            if isinstance(spec, AvgPoolTo1x1):
                self.base_layers.append(
                    lambda net, size=spec.default_size: _reduce_to_1x1(net, size))
                continue
            num_outputs = multiplied(spec.num_outputs, index == len(conv_defs.layers) - 1)
            dilation = layer_rate if spec.kernel_size > 1 else 1
            activation = spec.activation or conv_defs.activation
            name = self._unique_name(counts, 'Conv' if isinstance(spec, Conv)
                                     else 'expanded_conv')
            if isinstance(spec, Conv):
                options = dict(conv_options)
                if not spec.batch_norm:
                    options['normalizer'] = None
                self.base_layers.append(layers.Conv2D(
                    name, num_outputs, spec.kernel_size, stride=layer_stride,
                    rate=dilation, padding=padding, activation=activation, **options))
            else:
                if depth is None:
                    raise ValueError('A MobileNet description must start with a Conv.')
                self.base_layers.append(conv_blocks.ExpandedConv(
                    name, input_depth=depth, num_outputs=num_outputs,
                    expansion_depth=conv_blocks.make_divisible(
                        depth * spec.expansion, spec.expansion_divisible_by),
                    kernel_size=spec.kernel_size, stride=layer_stride, rate=dilation,
                    activation=activation, conv_options=conv_options, padding=padding,
                    fused=spec.fused, squeeze_excite=spec.squeeze_excite,
                    residual=spec.residual))
            depth = num_outputs
        layers.schedule_drop_path([layer for layer in self.base_layers
                                   if isinstance(layer, conv_blocks.ExpandedConv)
                                   and layer.residual], drop_path_rate)
        self.logits = None
        if num_classes:
            self.logits = layers.Conv2D(
                'Logits/Conv2d_1c_1x1', num_classes, 1, activation=None, normalizer=None,
                weights_initializer=initializer, weight_decay=weight_decay,
                quantization=self.quantization)

    @staticmethod
    def _unique_name(counts, base):
        """slim's default scopes: 'Conv', 'Conv_1', 'Conv_2', ..."""
        count = counts.get(base, 0)
        counts[base] = count + 1
        return f'{base}_{count}' if count else base

    def forward_base(self, images, *, final_endpoint, training, random_generator=None):
        end_points = EndPoints(final_endpoint)
        net = images
        for index, layer in enumerate(self.base_layers, 1):
            name = f'layer_{index}'
            if isinstance(layer, conv_blocks.ExpandedConv):
                net, block_end_points = layer(net, training=training,
                                              random_generator=random_generator)
                end_points.update({f'{name}/{key}': value
                                   for key, value in block_end_points.items()})
            else:
                net = layers.apply(layer, net, training=training)
            if end_points.add(name, net):
                return net, end_points
        raise end_points.unknown_final_endpoint()

    def forward(self, images, *, training, random_generator=None):
        net, end_points = self.forward_base(
            images, final_endpoint=self.default_final_endpoint, training=training,
            random_generator=random_generator)
        output = heads.conv_classifier(
            net, self.logits, end_points,
            pool=lambda features: ('global_pool', heads.whole_map_average(features)),
            dropout_keep_prob=self.dropout_keep_prob, training=training,
            random_generator=random_generator, spatial_squeeze=self.spatial_squeeze)
        return output, end_points
