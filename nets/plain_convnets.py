"""The plain convolutional nets of TF-Slim, no batch norm: AlexNet v2 (Krizhevsky 2014,
arXiv 1404.5997), OverFeat (Sermanet et al. 2013, arXiv 1312.6229) and VGG A/16/19
(Simonyan and Zisserman 2014, arXiv 1409.1556). Each is a conv/pool stack described as
data, then the same head of convolutions standing in for fully connected layers (fc6 a
VALID conv over the last feature map), so the nets also run fully convolutionally.

As slim, end point keys are full scope names ('vgg_16/conv1/conv1_1', 'vgg_16/fc8');
there is no Predictions end point, and `base(final_endpoint=...)` takes those keys.
"""
import tensorflow as tf

from nets import layers
from nets.network import EndPoints, Network
from nets.registry import register_network


class PlainConvNet(Network):
    """A conv/pool stack, then fc6/fc7/fc8 as convolutions.

    `stack` is data: (name, ('conv', depth, kernel, stride, padding)) or
    (name, ('max', kernel, stride)); its convs take `conv_options`. fc6 is
    (depth, kernel, padding); fc6 and fc7 take `head_options`, fc8 `fc8_options`.
    """

    def __init__(self, num_classes, *, scope, stack, conv_options, fc6, fc7_depth,
                 head_options, fc8_options, is_training, dropout_keep_prob=0.5,
                 spatial_squeeze=True, global_pool=False, spec=None, quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        self.dropout_keep_prob = dropout_keep_prob
        self.spatial_squeeze = spatial_squeeze
        self.global_pool = global_pool
        quantized = dict(quantization=self.quantization)

        def conv(name, depth, kernel, stride, padding):
            return layers.Conv2D(name, depth, kernel, stride=stride, padding=padding,
                                 **conv_options, **quantized)

        # (name, Conv2D) or (name, (max pool kernel, stride)).
        self.blocks = [(name, conv(name, *args) if kind == 'conv' else tuple(args))
                       for name, (kind, *args) in stack]
        self.default_final_endpoint = f'{scope}/{stack[-1][0]}'
        fc6_depth, fc6_kernel, fc6_padding = fc6
        self.fc6 = layers.Conv2D('fc6', fc6_depth, fc6_kernel, padding=fc6_padding,
                                 **head_options, **quantized)
        self.fc7 = layers.Conv2D('fc7', fc7_depth, 1, **head_options, **quantized)
        self.fc8 = (layers.Conv2D('fc8', num_classes, 1, activation=None, **fc8_options,
                                  **quantized)
                    if num_classes else None)

    def forward_base(self, images, *, final_endpoint, training):
        end_points = EndPoints(final_endpoint)
        net = images
        for name, layer in self.blocks:
            net = (layer(net, training=training) if isinstance(layer, layers.Module)
                   else layers.max_pool(net, *layer))
            if end_points.add(f'{self.scope}/{name}', net):
                return net, end_points
        raise end_points.unknown_final_endpoint()

    def forward(self, images, *, training, random_generator=None):
        net, end_points = self.forward_base(images, final_endpoint=self.default_final_endpoint,
                                            training=training)
        net = end_points[f'{self.scope}/fc6'] = self.fc6(net, training=training)
        net = layers.dropout(net, self.dropout_keep_prob, training=training,
                             random_generator=random_generator)
        net = end_points[f'{self.scope}/fc7'] = self.fc7(net, training=training)
        if self.global_pool:
            net = end_points['global_pool'] = tf.reduce_mean(net, [1, 2], keepdims=True,
                                                             name='global_pool')
        if not self.num_classes:
            return net, end_points
        net = layers.dropout(net, self.dropout_keep_prob, training=training,
                             random_generator=random_generator)
        net = self.fc8(net, training=training)
        if self.spatial_squeeze:
            net = tf.squeeze(net, [1, 2], name='fc8/squeezed')
        end_points[f'{self.scope}/fc8'] = net
        return net, end_points


# --- AlexNet v2 and OverFeat: their arg scopes give the fc layers truncated-normal
# weights (0.005) and biases of 0.1; fc8's biases are zeros. Pools are VALID. ---

def _alexnet_like(name, num_classes, weight_decay, is_training, *, convs, pool,
                  conv_biases, fc6_kernel, fc6_depth, **options):
    decay = dict(weight_decay=weight_decay)
    stack = []
    for i, conv in enumerate(convs, start=1):  # (depth, kernel, stride, padding)
        stack.append((f'conv{i}', ('conv', *conv)))
        if i in (1, 2, 5):
            stack.append((f'pool{i}', ('max', *pool)))
    head = dict(weights_initializer=layers.truncated_normal_initializer(0.005),
                biases_initializer=layers.constant_initializer(0.1), **decay)
    return PlainConvNet(
        num_classes, scope=name, stack=stack,
        conv_options=dict(biases_initializer=layers.constant_initializer(conv_biases),
                          **decay),
        fc6=(fc6_depth, fc6_kernel, 'VALID'), fc7_depth=4096, is_training=is_training,
        head_options=head,
        fc8_options=dict(head, biases_initializer=layers.zeros_initializer()), **options)


@register_network('alexnet_v2', default_image_size=224, preprocessing_name='vgg')
def alexnet_v2(num_classes=1000, weight_decay=0.0005, is_training=False, **options):
    return _alexnet_like(
        'alexnet_v2', num_classes, weight_decay, is_training, pool=(3, 2), conv_biases=0.1,
        convs=[(64, 11, 4, 'VALID'), (192, 5, 1, 'SAME'), (384, 3, 1, 'SAME'),
               (384, 3, 1, 'SAME'), (256, 3, 1, 'SAME')],
        fc6_kernel=5, fc6_depth=4096, **options)


@register_network('overfeat', default_image_size=231, preprocessing_name='vgg')
def overfeat(num_classes=1000, weight_decay=0.0005, is_training=False, **options):
    return _alexnet_like(
        'overfeat', num_classes, weight_decay, is_training, pool=(2, 2), conv_biases=0.0,
        convs=[(64, 11, 4, 'VALID'), (256, 5, 1, 'VALID'), (512, 3, 1, 'SAME'),
               (1024, 3, 1, 'SAME'), (1024, 3, 1, 'SAME')],
        fc6_kernel=6, fc6_depth=3072, **options)


# --- VGG: Xavier weights, zero biases, 2x2 pools; fc6 7x7 (fc_conv_padding). ---

DEPTHS = (64, 128, 256, 512, 512)
CONVS_PER_BLOCK = {'vgg_a': (1, 1, 2, 2, 2), 'vgg_16': (2, 2, 3, 3, 3),
                   'vgg_19': (2, 2, 4, 4, 4)}


def _vgg(name, num_classes, weight_decay, is_training, fc_conv_padding='VALID',
         **options):
    decay = dict(weight_decay=weight_decay)
    stack = []
    for block, (count, depth) in enumerate(zip(CONVS_PER_BLOCK[name], DEPTHS), start=1):
        stack += [(f'conv{block}/conv{block}_{i}', ('conv', depth, 3, 1, 'SAME'))
                  for i in range(1, count + 1)]
        stack.append((f'pool{block}', ('max', 2, 2)))
    return PlainConvNet(
        num_classes, scope=name, stack=stack, conv_options=decay,
        fc6=(4096, 7, fc_conv_padding), fc7_depth=4096, is_training=is_training,
        head_options=decay, fc8_options=decay, **options)


def _register(name, checkpoint_num_classes, checkpoint_file):
    @register_network(name, default_image_size=224, preprocessing_name='vgg',
                      checkpoint_num_classes=checkpoint_num_classes,
                      checkpoint_file=checkpoint_file)
    def build(num_classes=1000, weight_decay=0.0005, is_training=False, **options):
        return _vgg(name, num_classes, weight_decay, is_training, **options)

    return build


vgg_a = _register('vgg_a', None, None)
vgg_16 = _register('vgg_16', 1000, 'vgg_16_2016_08_28.tar.gz')
vgg_19 = _register('vgg_19', 1000, 'vgg_19_2016_08_28.tar.gz')
