"""VGG as in TF-Slim (Simonyan and Zisserman 2014, arXiv 1409.1556): configurations A,
D (vgg_16) and E (vgg_19) from one builder; the fully connected layers are convolutions
(fc6 a 7x7 VALID conv), so the net also runs fully convolutionally.

As slim, end point keys are full scope names ('vgg_16/conv1/conv1_1', 'vgg_16/fc8');
there is no Predictions end point, and `base(final_endpoint=...)` takes those keys.
"""
import tensorflow as tf

from nets import layers
from nets.network import EndPoints, Network
from nets.registry import register_network

DEPTHS = (64, 128, 256, 512, 512)
CONVS_PER_BLOCK = {'vgg_a': (1, 1, 2, 2, 2), 'vgg_16': (2, 2, 3, 3, 3),
                   'vgg_19': (2, 2, 4, 4, 4)}


class VGG(Network):

    def __init__(self, num_classes: int = 1000, *, convs_per_block, scope: str,
                 weight_decay: float = 0.0005, is_training: bool = False,
                 dropout_keep_prob: float = 0.5, spatial_squeeze: bool = True,
                 fc_conv_padding: str = 'VALID', global_pool: bool = False):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training)
        self.dropout_keep_prob = dropout_keep_prob
        self.spatial_squeeze = spatial_squeeze
        self.global_pool = global_pool
        conv = dict(weight_decay=weight_decay)  # vgg_arg_scope: Xavier, zero biases, ReLU
        self.blocks = []  # (end point suffix, layer or None for a pool)
        for block, (count, depth) in enumerate(zip(convs_per_block, DEPTHS), start=1):
            for i in range(1, count + 1):
                name = f'conv{block}/conv{block}_{i}'
                self.blocks.append((name, layers.Conv2D(name, depth, 3, **conv)))
            self.blocks.append((f'pool{block}', None))
        self.default_final_endpoint = f'{scope}/pool5'
        self.fc6 = layers.Conv2D('fc6', 4096, 7, padding=fc_conv_padding, **conv)
        self.fc7 = layers.Conv2D('fc7', 4096, 1, **conv)
        self.fc8 = (layers.Conv2D('fc8', num_classes, 1, activation=None, **conv)
                    if num_classes else None)

    def forward_base(self, images, *, final_endpoint, training):
        end_points = EndPoints(final_endpoint)
        net = images
        for name, layer in self.blocks:
            net = (layer(net, training=training) if layer is not None
                   else layers.max_pool(net, 2, 2))
            if end_points.add(f'{self.scope}/{name}', net):
                return net, end_points
        raise end_points.unknown_final_endpoint()

    def forward(self, images, *, training):
        net, end_points = self.forward_base(images, final_endpoint=self.default_final_endpoint,
                                            training=training)
        net = end_points[f'{self.scope}/fc6'] = self.fc6(net, training=training)
        net = layers.dropout(net, self.dropout_keep_prob, training=training)
        net = end_points[f'{self.scope}/fc7'] = self.fc7(net, training=training)
        if self.global_pool:
            net = end_points['global_pool'] = tf.reduce_mean(net, [1, 2], keepdims=True,
                                                             name='global_pool')
        if not self.num_classes:
            return net, end_points
        net = layers.dropout(net, self.dropout_keep_prob, training=training)
        net = self.fc8(net, training=training)
        if self.spatial_squeeze:
            net = tf.squeeze(net, [1, 2], name='fc8/squeezed')
        end_points[f'{self.scope}/fc8'] = net
        return net, end_points


def _register(name, checkpoint_num_classes, checkpoint_file):
    @register_network(name, default_image_size=224, preprocessing_name='vgg',
                      checkpoint_num_classes=checkpoint_num_classes,
                      checkpoint_file=checkpoint_file)
    def build(num_classes=1000, weight_decay=0.0005, is_training=False, **options):
        return VGG(num_classes, convs_per_block=CONVS_PER_BLOCK[name], scope=name,
                   weight_decay=weight_decay, is_training=is_training, **options)

    return build


vgg_a = _register('vgg_a', None, None)
vgg_16 = _register('vgg_16', 1000, 'vgg_16_2016_08_28.tar.gz')
vgg_19 = _register('vgg_19', 1000, 'vgg_19_2016_08_28.tar.gz')
