"""LeNet as in TF-Slim: LeCun et al., "Gradient-based learning applied to document
recognition", Proc. IEEE 1998 (slim's variant: ReLU, max pooling, 1024-unit fc3)."""
import tensorflow as tf

from nets import layers
from nets.network import Network
from nets.registry import register_network


class LeNet(Network):

    def __init__(self, num_classes: int = 10, *, weight_decay: float = 0.0,
                 is_training: bool = False, dropout_keep_prob: float = 0.5,
                 scope: str = 'LeNet', spec=None, quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        self.dropout_keep_prob = dropout_keep_prob
        common = dict(weights_initializer=layers.truncated_normal_initializer(0.1),
                      weight_decay=weight_decay, quantization=self.quantization)
        self.conv1 = layers.Conv2D('conv1', 32, 5, **common)
        self.conv2 = layers.Conv2D('conv2', 64, 5, **common)
        self.fc3 = layers.FullyConnected('fc3', 1024, **common)
        self.fc4 = (layers.FullyConnected('fc4', num_classes, activation=None, **common)
                    if num_classes else None)

    def forward(self, images, *, training, random_generator=None):
        end_points = {}
        net = end_points['conv1'] = self.conv1(images, training=training)
        net = end_points['pool1'] = layers.max_pool(net, 2, 2)
        net = end_points['conv2'] = self.conv2(net, training=training)
        net = end_points['pool2'] = layers.max_pool(net, 2, 2)
        net = end_points['Flatten'] = layers.flatten(net)
        net = end_points['fc3'] = self.fc3(net, training=training)
        if not self.num_classes:
            return net, end_points
        net = end_points['dropout3'] = layers.dropout(net, self.dropout_keep_prob,
                                                      training=training,
                                                      random_generator=random_generator)
        logits = end_points['Logits'] = self.fc4(net, training=training)
        end_points['Predictions'] = tf.nn.softmax(logits, name='Predictions')
        return logits, end_points


@register_network('lenet', default_image_size=28, preprocessing_name='lenet')
def lenet(num_classes=10, weight_decay=0.0, is_training=False, **options):
    return LeNet(num_classes, weight_decay=weight_decay, is_training=is_training, **options)
