"""Inception v4 as in TF-Slim (Szegedy et al. 2016, "Inception-v4, Inception-ResNet and
the Impact of Residual Connections on Learning", arXiv 1602.07261): a stem of VALID
convs and two-branch blocks (Mixed_3a, 4a, 5a), 4 Inception-A, Reduction-A, 7
Inception-B, Reduction-B and 3 Inception-C blocks, described as data below; an
auxiliary head on Mixed_6h (built in both modes, as slim) and a fully connected
classifier.

slim's quirks kept: the final pooling is an average over the whole feature map (the
kernel follows the input, or a mean when the size is unknown), recorded as the
'global_pool' end point whatever the input; the auxiliary head's 'Conv2d_2a' spans the
whole pooled map (its kernel, not its name, follows the input); dropout comes before
the flatten ('PreLogitsFlatten').
"""
from typing import Optional

import tensorflow as tf

from nets import heads, inception_blocks, layers
from nets.inception_blocks import BATCH_NORM
from nets.network import Network
from nets.registry import register_network


# --- Block descriptions (nets/inception_blocks.py): per block, its branches. ---

def _avg_branch(depth):
    return [('avg', 'AvgPool_0a_3x3', 3, 1, 'SAME'), ('conv', 'Conv2d_0b_1x1', depth, 1)]


INCEPTION_A = [
    [('conv', 'Conv2d_0a_1x1', 96, 1)],
    [('conv', 'Conv2d_0a_1x1', 64, 1), ('conv', 'Conv2d_0b_3x3', 96, 3)],
    [('conv', 'Conv2d_0a_1x1', 64, 1), ('conv', 'Conv2d_0b_3x3', 96, 3),
     ('conv', 'Conv2d_0c_3x3', 96, 3)],
    _avg_branch(96),
]
INCEPTION_B = [
    [('conv', 'Conv2d_0a_1x1', 384, 1)],
    [('conv', 'Conv2d_0a_1x1', 192, 1), ('conv', 'Conv2d_0b_1x7', 224, [1, 7]),
     ('conv', 'Conv2d_0c_7x1', 256, [7, 1])],
    [('conv', 'Conv2d_0a_1x1', 192, 1), ('conv', 'Conv2d_0b_7x1', 192, [7, 1]),
     ('conv', 'Conv2d_0c_1x7', 224, [1, 7]), ('conv', 'Conv2d_0d_7x1', 224, [7, 1]),
     ('conv', 'Conv2d_0e_1x7', 256, [1, 7])],
    _avg_branch(128),
]
INCEPTION_C = [
    [('conv', 'Conv2d_0a_1x1', 256, 1)],
    [('conv', 'Conv2d_0a_1x1', 384, 1),
     ('fork', [('Conv2d_0b_1x3', 256, [1, 3]), ('Conv2d_0c_3x1', 256, [3, 1])])],
    [('conv', 'Conv2d_0a_1x1', 384, 1), ('conv', 'Conv2d_0b_3x1', 448, [3, 1]),
     ('conv', 'Conv2d_0c_1x3', 512, [1, 3]),
     ('fork', [('Conv2d_0d_1x3', 256, [1, 3]), ('Conv2d_0e_3x1', 256, [3, 1])])],
    _avg_branch(256),
]
REDUCTION_A = [
    [('conv', 'Conv2d_1a_3x3', 384, 3, 2, 'VALID')],
    [('conv', 'Conv2d_0a_1x1', 192, 1), ('conv', 'Conv2d_0b_3x3', 224, 3),
     ('conv', 'Conv2d_1a_3x3', 256, 3, 2, 'VALID')],
    [('max', 'MaxPool_1a_3x3', 3, 2, 'VALID')],
]
REDUCTION_B = [
    [('conv', 'Conv2d_0a_1x1', 192, 1), ('conv', 'Conv2d_1a_3x3', 192, 3, 2, 'VALID')],
    [('conv', 'Conv2d_0a_1x1', 256, 1), ('conv', 'Conv2d_0b_1x7', 256, [1, 7]),
     ('conv', 'Conv2d_0c_7x1', 320, [7, 1]), ('conv', 'Conv2d_1a_3x3', 320, 3, 2, 'VALID')],
    [('max', 'MaxPool_1a_3x3', 3, 2, 'VALID')],
]

STEM = [
    ('conv', 'Conv2d_1a_3x3', 32, 3, 2, 'VALID'),
    ('conv', 'Conv2d_2a_3x3', 32, 3, 1, 'VALID'),
    ('conv', 'Conv2d_2b_3x3', 64, 3, 1, 'SAME'),
]
BLOCKS = [
    ('Mixed_3a', [[('max', 'MaxPool_0a_3x3', 3, 2, 'VALID')],
                  [('conv', 'Conv2d_0a_3x3', 96, 3, 2, 'VALID')]]),
    ('Mixed_4a', [[('conv', 'Conv2d_0a_1x1', 64, 1),
                   ('conv', 'Conv2d_1a_3x3', 96, 3, 1, 'VALID')],
                  [('conv', 'Conv2d_0a_1x1', 64, 1), ('conv', 'Conv2d_0b_1x7', 64, [1, 7]),
                   ('conv', 'Conv2d_0c_7x1', 64, [7, 1]),
                   ('conv', 'Conv2d_1a_3x3', 96, 3, 1, 'VALID')]]),
    ('Mixed_5a', [[('conv', 'Conv2d_1a_3x3', 192, 3, 2, 'VALID')],
                  [('max', 'MaxPool_1a_3x3', 3, 2, 'VALID')]]),
    *[(f'Mixed_5{letter}', INCEPTION_A) for letter in 'bcde'],
    ('Mixed_6a', REDUCTION_A),
    *[(f'Mixed_6{letter}', INCEPTION_B) for letter in 'bcdefgh'],
    ('Mixed_7a', REDUCTION_B),
    *[(f'Mixed_7{letter}', INCEPTION_C) for letter in 'bcd'],
]


class InceptionV4(Network):

    default_final_endpoint = 'Mixed_7d'

    def __init__(self, num_classes: int = 1001, *, weight_decay: float = 0.00004,
                 is_training: bool = False, dropout_keep_prob: float = 0.8,
                 create_aux_logits: bool = True, scope: str = 'InceptionV4',
                 batch_norm: layers.BatchNormParams = BATCH_NORM, spec=None,
                 quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        self.batch_norm = batch_norm
        self.dropout_keep_prob = dropout_keep_prob
        self.weight_decay = weight_decay
        self.blocks = [(layer_spec[1], inception_blocks.build_layer(layer_spec, self._conv))
                       for layer_spec in STEM]
        self.blocks += [(name, inception_blocks.build_mixed(name, branches, self._conv))
                        for name, branches in BLOCKS]
        self.aux_head = self.logits = None
        if num_classes:
            if create_aux_logits:
                self.aux_head = inception_blocks.AuxHead(
                    self._conv, conv_name='Conv2d_2a', logits=self._fully_connected('Aux_logits'))
            self.logits = self._fully_connected('Logits/Logits')

    def _conv(self, name, depth, kernel, stride=1, padding='SAME'):
        # slim's inception_arg_scope: batch norm, ReLU, variance-scaling weights.
        return layers.Conv2D(name, depth, kernel, stride=stride, padding=padding,
                             normalizer=self.batch_norm,
                             weights_initializer=layers.variance_scaling_initializer(),
                             weight_decay=self.weight_decay, quantization=self.quantization)

    def _fully_connected(self, name):
        return layers.FullyConnected(name, self.num_classes, activation=None,
                                     weight_decay=self.weight_decay,
                                     quantization=self.quantization)

    def forward_base(self, images, *, final_endpoint, training):
        return inception_blocks.forward_through(self.blocks, images,
                                                final_endpoint=final_endpoint,
                                                training=training)

    def forward(self, images, *, training, random_generator=None):
        net, end_points = self.forward_base(images, final_endpoint='Mixed_7d',
                                            training=training)
        if self.aux_head is not None:
            end_points['AuxLogits'] = self.aux_head(end_points['Mixed_6h'],
                                                    training=training)
        with tf.name_scope('Logits'):  # op names as slim's ('InceptionV4/Logits/...')
            net = end_points['global_pool'] = heads.whole_map_average(net)
            if not self.num_classes:
                return net, end_points
            net = layers.dropout(net, self.dropout_keep_prob, training=training,
                                 random_generator=random_generator)
            net = end_points['PreLogitsFlatten'] = layers.flatten(net)
            logits = end_points['Logits'] = self.logits(net, training=training)
            end_points['Predictions'] = tf.nn.softmax(logits, name='Predictions')
        return logits, end_points


@register_network('inception_v4', default_image_size=299, preprocessing_name='inception',
                  checkpoint_num_classes=1001,
                  checkpoint_file='inception_v4_2016_09_09.tar.gz',
                  batch_norm=BATCH_NORM)
def inception_v4(num_classes=1001, weight_decay=0.00004, is_training=False,
                 **options) -> Optional[InceptionV4]:
    return InceptionV4(num_classes, weight_decay=weight_decay, is_training=is_training,
                       **options)
