"""CifarNet as in TF-Slim: the CIFAR-10 network of the TensorFlow tutorial, after
Krizhevsky's cuda-convnet layers-18pct configuration (two conv + LRN, three fc)."""
import tensorflow as tf

from nets import layers
from nets.network import Network
from nets.registry import register_network


def _local_response_norm(inputs):
    return layers.local_response_normalization(
        inputs, depth_radius=4, bias=1.0, alpha=0.001 / 9.0, beta=0.75)


class CifarNet(Network):

    def __init__(self, num_classes: int = 10, *, weight_decay: float = 0.004,
                 is_training: bool = False, dropout_keep_prob: float = 0.5,
                 scope: str = 'CifarNet', spec=None, quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        self.dropout_keep_prob = dropout_keep_prob
        # As slim's cifarnet_arg_scope: only the hidden fc layers are weight-decayed.
        conv = dict(weights_initializer=layers.truncated_normal_initializer(5e-2),
                    quantization=self.quantization)
        fc = dict(weights_initializer=layers.truncated_normal_initializer(0.04),
                  biases_initializer=layers.constant_initializer(0.1),
                  weight_decay=weight_decay, quantization=self.quantization)
        self.conv1 = layers.Conv2D('conv1', 64, 5, **conv)
        self.conv2 = layers.Conv2D('conv2', 64, 5, **conv)
        self.fc3 = layers.FullyConnected('fc3', 384, **fc)
        self.fc4 = layers.FullyConnected('fc4', 192, **fc)
        self.logits = (layers.FullyConnected(
            'logits', num_classes, activation=None,
            weights_initializer=layers.truncated_normal_initializer(1 / 192.0),
            quantization=self.quantization)
            if num_classes else None)

    def forward(self, images, *, training, random_generator=None):
        end_points = {}
        net = end_points['conv1'] = self.conv1(images, training=training)
        net = end_points['pool1'] = layers.max_pool(net, 2, 2)
        net = _local_response_norm(net)
        net = end_points['conv2'] = self.conv2(net, training=training)
        net = _local_response_norm(net)
        net = end_points['pool2'] = layers.max_pool(net, 2, 2)
        net = end_points['Flatten'] = layers.flatten(net)
        net = end_points['fc3'] = self.fc3(net, training=training)
        net = layers.dropout(net, self.dropout_keep_prob, training=training,
                             random_generator=random_generator)
        net = end_points['fc4'] = self.fc4(net, training=training)
        if not self.num_classes:
            return net, end_points
        logits = end_points['Logits'] = self.logits(net, training=training)
        end_points['Predictions'] = tf.nn.softmax(logits, name='Predictions')
        return logits, end_points


@register_network('cifarnet', default_image_size=32, preprocessing_name='cifarnet')
def cifarnet(num_classes=10, weight_decay=0.004, is_training=False, **options):
    return CifarNet(num_classes, weight_decay=weight_decay, is_training=is_training,
                    **options)
