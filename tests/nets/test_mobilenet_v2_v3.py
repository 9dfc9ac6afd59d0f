"""MobileNet V2 / V3 / EdgeTPU: the facts TF-Slim's mobilenet_v2_test and
mobilenet_v3_test assert, the options users rely on, and agreement with the original."""
import functools

import numpy as np
import pytest
import tensorflow as tf

from helpers import testing_utils
from nets import layers, nets_factory
from nets.mobilenet import conv_blocks, mobilenet_v2, mobilenet_v3

NAMES = ['mobilenet_v2', 'mobilenet_v2_140', 'mobilenet_v2_035', 'mobilenet_v3_small',
         'mobilenet_v3_large', 'mobilenet_v3_small_minimalistic',
         'mobilenet_v3_large_minimalistic', 'mobilenet_edgetpu', 'mobilenet_edgetpu_075']

# logits[:, :4] of TF-Slim's original nets (nets/mobilenet in its last, tf_slim-based
# form, run on tf_slim 1.1 and TF 2.21 in graph mode under training_scope, inference)
# with every variable set by the golden weights rule (testing_utils), on the input
# np.random.default_rng(0).uniform(-1, 1, (2, 64, 64, 3)).
SLIM_LOGITS_64 = {
    'mobilenet_v2': [[6.418581, 0.8170807, 2.107968, 4.220133],
                     [6.140397, 0.2472858, 1.646384, 3.29406]],
    'mobilenet_v2_140': [[3.75002, 2.344679, 1.452029, 3.045018],
                         [2.620934, 2.032879, -1.24448, 2.951631]],
    'mobilenet_v2_035': [[2.840342, -0.8107585, 1.622744, 6.680376],
                         [2.968427, 1.028565, 1.576679, 6.031545]],
    'mobilenet_v3_small': [[-0.4778131, -0.2208355, 0.2881899, -0.01597323],
                           [-0.2235034, -0.3125821, 0.1307009, -0.07520773]],
    'mobilenet_v3_large': [[-16.03741, -11.82073, 72.05629, -36.62982],
                           [4.216208, 0.6547968, 2.408277, 36.91308]],
    'mobilenet_v3_small_minimalistic': [[-292.451, 261.3913, 111.5109, -43.97635],
                                        [-277.5873, 303.492, 69.79838, -75.37395]],
    'mobilenet_v3_large_minimalistic': [[1352.18, 1803.711, 2537.671, 1766.532],
                                        [1257.376, 1912.425, 2868.849, 2082.1]],
    'mobilenet_edgetpu': [[-2655.613, -1009.436, -4070.339, 5565.807],
                          [-2602.673, 408.7103, -1324.697, 4154.742]],
    'mobilenet_edgetpu_075': [[-11423.21, 1904.84, -2187.505, 8693.236],
                              [-16034.24, 588.0893, -273.2035, 9711.081]],
}


def _images(size=32, batch=2, channels=3, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (batch, size, size, channels)).astype(
        np.float32)


def _trace(call, shape):
    """Runs `call(images)` symbolically on `shape` (the variables must exist: creating
    them in a trace is slower than an eager call)."""
    outputs = {}

    @tf.function(autograph=False)
    def run(images):
        outputs['result'] = call(images)
        return 0

    run.get_concrete_function(tf.TensorSpec(shape, tf.float32))
    return outputs['result']


def _conv_depths(net):
    """The output depths of the net's regular (non-depthwise) convolutions."""
    return {m.num_outputs for m in net.submodules if isinstance(m, layers.Conv2D)}


@functools.lru_cache(maxsize=None)
def _golden_net(name):
    """The registered net for inference with the golden weights, shared by the tests
    that only read it (building a net costs more than running it)."""
    net = nets_factory.get_network_fn(name, 1001)
    net.build((32, 32, 3))
    for variable in net.variables:
        variable.assign(testing_utils.golden_weight_value(variable.name[:-2], variable.shape))
    return net


# One net per kind of block runs by default; the depth variants are slow-marked.
@pytest.mark.parametrize('name', [
    name if name in ('mobilenet_v2', 'mobilenet_v3_small', 'mobilenet_v3_large',
                     'mobilenet_edgetpu') else pytest.param(name, marks=pytest.mark.slow)
    for name in NAMES])
def test_logits_match_slims_original(name):
    net = _golden_net(name)
    logits, end_points = net(_images(64))
    expected = np.array(SLIM_LOGITS_64[name])
    scale = max(1.0, np.abs(expected).max())
    assert np.abs(logits.numpy()[:, :4] - expected).max() / scale < 1e-4
    np.testing.assert_allclose(end_points['Predictions'].numpy().sum(-1), 1.0, rtol=1e-5)


class TestMobilenetV2:

    def test_creation_on_16_channel_input(self):
        net = mobilenet_v2.mobilenet(1001)
        _, end_points = net(_images(224, channels=16))
        # All layers but the first two and the last have two pointwise convs; + logits.
        convs = [m for m in net.submodules if isinstance(m, layers.Conv2D)]
        assert len(convs) == 2 * len(mobilenet_v2.V2_DEF.layers) - 2
        for i in range(2, 17):
            assert f'layer_{i}/depthwise_output' in end_points
        # The first block (expansion 1) does not widen its input, so it does not expand.
        assert 'layer_2/expansion_output' not in end_points
        assert end_points['layer_3/expansion_output'].shape == [2, 112, 112, 96]
        assert net.base_layers[0].weights.shape == [3, 3, 16, 32]

    def test_no_classes_returns_global_pool(self):
        net = mobilenet_v2.mobilenet(None)
        features, end_points = net(_images(32))
        assert features is end_points['global_pool']
        assert features.shape == [2, 1, 1, 1280]
        assert 'Logits' not in end_points and 'Predictions' not in end_points
        assert not any('Logits' in v.name for v in net.variables)

    def test_image_sizes(self):
        net = _golden_net('mobilenet_v2')
        for input_size, output_size in [(224, 7), (192, 6), (160, 5), (128, 4), (96, 3)]:
            _, end_points = net(_images(input_size, batch=1))
            assert end_points['layer_18/output'].shape[1:3] == [output_size] * 2

    @pytest.mark.parametrize('explicit_padding', [False, True])
    @pytest.mark.parametrize('output_stride, size', [(8, 28), (16, 14)])
    def test_output_stride(self, output_stride, size, explicit_padding):
        net = mobilenet_v2.mobilenet(1001, output_stride=output_stride,
                                     use_explicit_padding=explicit_padding)
        features, _ = net.base(_images(224, batch=1, channels=16))
        assert features.shape == [1, size, size, 1280]

    def test_output_stride_dilates_only_spatial_kernels(self):
        net = mobilenet_v2.mobilenet(1001, output_stride=8)
        block = net.base_layers[8]  # layer_9: after layer_8, whose stride became a rate
        assert block.depthwise.rate == (2, 2) and block.depthwise.stride == (1, 1)
        assert block.expand.rate == (1, 1) and block.project.rate == (1, 1)
        assert net.base_layers[18].rate == (1, 1)  # the final 1x1 conv
        # layer_15's own stride becomes the next rate: it dilates by 2, layer_16 by 4.
        assert net.base_layers[14].depthwise.rate == (2, 2)
        assert net.base_layers[15].depthwise.rate == (4, 4)

    def test_explicit_padding_pads_then_convolves_valid(self):
        net = mobilenet_v2.mobilenet(1001, use_explicit_padding=True)
        assert net.base_layers[0].padding == 'EXPLICIT'
        assert net.base_layers[2].depthwise.padding == 'EXPLICIT'
        features, _ = net.base(_images(33))  # odd sizes: the same shapes as SAME
        assert features.shape == [2, 2, 2, 1280]

    def test_divisible_by(self):
        net = mobilenet_v2.mobilenet(1001, divisible_by=16, min_depth=32)
        assert _conv_depths(net) == {32, 64, 96, 160, 192, 320, 384, 576, 960, 1280, 1001}

    def test_min_depth(self):
        net = mobilenet_v2.mobilenet(1001, depth_multiplier=0.1, min_depth=32)
        assert _conv_depths(net) == {32, 192, 128, 1001}
        features, _ = net.base(_images(224, channels=16))
        assert features.shape == [2, 7, 7, 128]

    def test_finegrain_classification_mode(self):
        net = mobilenet_v2.mobilenet(1001, depth_multiplier=0.01,
                                     finegrain_classification_mode=True)
        # Every convolution is 8 -> 48 except the last one.
        assert _conv_depths(net) == {8, 48, 1001, 1280}
        # V2's finegrain mode only undoes shrinking: 1.4 still widens the last layer.
        wide = mobilenet_v2.mobilenet(1001, depth_multiplier=1.4,
                                      finegrain_classification_mode=True)
        assert wide.base_layers[-1].num_outputs == 1792

    def test_registered_multipliers(self):
        assert nets_factory.get_network_fn('mobilenet_v2_140', 1001).base_layers[0] \
            .num_outputs == 48
        thin = nets_factory.get_network_fn('mobilenet_v2_035', 1001)
        assert [thin.base_layers[i].num_outputs for i in (0, 1, 17, 18)] == [16, 8, 112, 1280]
        overridden = nets_factory.get_network_fn('mobilenet_v2_035', 1001,
                                                 depth_multiplier=0.5)
        assert overridden.base_layers[0].num_outputs == 16

    def test_invalid_options(self):
        with pytest.raises(ValueError, match='multiplier'):
            mobilenet_v2.mobilenet(1001, depth_multiplier=0)
        with pytest.raises(ValueError, match='Output stride'):
            mobilenet_v2.mobilenet(1001, output_stride=3)


class TestMobilenetV3:

    def test_large(self):
        net = _golden_net('mobilenet_v3_large')
        logits, end_points = net(_images(224, batch=1))
        assert end_points['layer_19'].shape == [1, 1, 1, 1280]
        assert logits.shape == [1, 1001]
        assert net.default_final_endpoint == 'layer_19'

    def test_small(self):
        net = _golden_net('mobilenet_v3_small')
        _, end_points = net(_images(224, batch=1))
        assert end_points['layer_15'].shape == [1, 1, 1, 1024]
        assert end_points['layer_14'].shape == [1, 1, 1, 576]  # the pooling layer

    def test_edge_tpu(self):
        net = _golden_net('mobilenet_edgetpu')
        _, end_points = net(_images(224, batch=1))
        assert end_points['layer_24'].shape == [1, 7, 7, 1280]
        assert all(v.name.startswith('MobilenetEdgeTPU/') for v in net.variables)
        # Fused blocks: one full 3x3 expansion conv and no depthwise end point.
        assert net.base_layers[2].expand.weights.shape == [3, 3, 16, 128]
        assert 'layer_3/depthwise_output' not in end_points
        assert 'layer_11/depthwise_output' in end_points
        renamed = nets_factory.get_network_fn('mobilenet_edgetpu', 1001, scope='Scope')
        renamed(_images(32))
        assert all(v.name.startswith('Scope/') for v in renamed.variables)

    def test_base_only(self):
        net = nets_factory.get_network_fn('mobilenet_v3_large', 1001)
        features, _ = net.base(_images(224, batch=1), final_endpoint='layer_17')
        assert features.shape == [1, 7, 7, 960]
        features, _ = _trace(lambda x: net.base(x, final_endpoint='layer_17'),
                             [None, None, None, 3])
        assert features.shape.as_list() == [None, None, None, 960]
        assert not any('Logits' in v.name for v in net.variables)

    def test_finegrain_keeps_the_last_layer_unmultiplied(self):
        net = mobilenet_v3.mobilenet(1001, depth_multiplier=1.25,
                                     finegrain_classification_mode=True)
        assert net.base_layers[-1].num_outputs == 1280
        assert net.base_layers[0].num_outputs == 24  # 16 * 1.25 = 20, rounded to 8s
        thin = nets_factory.get_network_fn('mobilenet_edgetpu_075', 1001)
        assert [thin.base_layers[i].num_outputs for i in (0, 1, -1)] == [24, 16, 1280]

    def test_squeeze_excite_and_activations_as_specified(self):
        net = nets_factory.get_network_fn('mobilenet_v3_large', 1001)
        blocks = net.base_layers
        assert blocks[0].activation is conv_blocks.hard_swish
        assert blocks[3].squeeze_excite is None and blocks[4].squeeze_excite is not None
        assert blocks[4].depthwise.activation is tf.nn.relu
        assert blocks[7].expand.activation is conv_blocks.hard_swish
        assert blocks[4].squeeze_excite.squeeze.num_outputs == 24  # 72 / 4 -> 24
        assert blocks[18].batch_norm is None and blocks[18].biases_initializer is not None
        minimalistic = nets_factory.get_network_fn('mobilenet_v3_large_minimalistic', 1001)
        assert not any(isinstance(m, conv_blocks.SqueezeExcite)
                       for m in minimalistic.submodules)
        edge = nets_factory.get_network_fn('mobilenet_edgetpu', 1001)
        assert not edge.base_layers[14].residual and edge.base_layers[15].residual

    def test_edge_tpu_output_stride(self):
        net = nets_factory.get_network_fn('mobilenet_edgetpu', 1001, output_stride=16)
        features, _ = net.base(_images(224, batch=1))
        assert features.shape == [1, 14, 14, 1280]


class TestOptions:

    @pytest.mark.parametrize('name', ['mobilenet_v2', 'mobilenet_v3_small'])
    def test_base_stops_at_every_end_point(self, name):
        net = _golden_net(name)
        images = _images(32)
        _, all_end_points = net(images)
        layer_names = [k for k in all_end_points if k.startswith('layer_') and '/' not in k]
        assert layer_names[-1] == net.default_final_endpoint
        for index, final_endpoint in enumerate(layer_names, 1):
            features, end_points = net.base(images, final_endpoint=final_endpoint)
            assert [k for k in end_points if '/' not in k] == layer_names[:index]
            np.testing.assert_array_equal(features, all_end_points[final_endpoint])
        with pytest.raises(ValueError, match='Unknown final endpoint'):
            net.base(images, final_endpoint='layer_99')
        with pytest.raises(ValueError, match='Unknown final endpoint'):
            net.base(images, final_endpoint='layer_3/expansion_output')

    @pytest.mark.parametrize('name', ['mobilenet_v2', 'mobilenet_v3_large'])
    def test_small_inputs(self, name):
        net = _golden_net(name)
        for size in [8, 17, 32]:
            logits, end_points = net(_images(size))
            assert logits.shape == [2, 1001]
            assert end_points['global_pool'].shape[1:3] == [1, 1]
            assert np.isfinite(logits.numpy()).all()

    def test_spatial_squeeze_false(self):
        net = nets_factory.get_network_fn('mobilenet_v3_small', 7, spatial_squeeze=False)
        logits, end_points = net(_images(32))
        assert logits.shape == [2, 1, 1, 7]
        np.testing.assert_allclose(end_points['Predictions'].numpy().sum(-1), 1.0, rtol=1e-5)

    def test_training_updates_batch_norm_and_applies_dropout(self):
        net = nets_factory.get_network_fn('mobilenet_v3_small', 10, is_training=True,
                                          dropout_keep_prob=0.5)
        images = _images(32, batch=4)
        first, _ = net(images)
        second, _ = net(images)
        assert not np.allclose(first, second)  # dropout
        moving_means = [v for v in net.variables if v.name.endswith('moving_mean:0')]
        assert all(np.abs(v.numpy()).sum() > 0 for v in moving_means)
        eval_first, _ = net(images, training=False)
        eval_second, _ = net(images, training=False)
        np.testing.assert_array_equal(eval_first, eval_second)
        net.dropout_keep_prob = 1.0  # training is then deterministic (batch statistics)
        np.testing.assert_allclose(net(images)[0], net(images)[0], atol=1e-5)

    def test_weight_decay_on_conv2d_weights_only(self):
        # V3 Large has every kind of layer: conv with and without batch norm, expand,
        # depthwise, squeeze-excite, project, logits.
        net = nets_factory.get_network_fn('mobilenet_v3_large', 10, weight_decay=0.01)
        net.build((32, 32, 3))
        decayed = [v for v in net.variables if v.name.endswith('/weights:0')]
        losses = net.regularization_losses()
        assert len(losses) == len(decayed)
        expected = sum(0.01 * np.sum(v.numpy() ** 2) / 2 for v in decayed)
        assert float(tf.add_n(losses)) == pytest.approx(expected, rel=1e-5)
        assert any(v.name.endswith('depthwise_weights:0') for v in net.variables)
        assert nets_factory.get_network_fn('mobilenet_v3_large', 10, weight_decay=0.0) \
            .regularization_losses() == []

    def test_slims_training_scope_defaults(self):
        net = nets_factory.get_spec('mobilenet_v2').builder(num_classes=1001)
        assert net.dropout_keep_prob == 0.8
        conv = net.base_layers[0]
        assert conv.weight_decay == 0.00004
        params = conv.batch_norm.params
        assert (params.decay, params.epsilon, params.center, params.scale) == \
            (0.997, 0.001, True, True)
        weights = conv.weights_initializer([3, 3, 32, 64], tf.float32).numpy()
        assert np.abs(weights).max() <= 2 * 0.09 + 1e-6  # truncated normal
        assert weights.std() == pytest.approx(0.09 * 0.88, rel=0.05)


class TestBlocks:

    def test_make_divisible(self):
        assert conv_blocks.make_divisible(18, 8) == 24  # rounding down would lose > 10 %
        assert conv_blocks.make_divisible(30, 8) == 32
        assert conv_blocks.make_divisible(11.2, 8) == 16
        assert conv_blocks.make_divisible(3.2, 8, 32) == 32
        assert conv_blocks.make_divisible(1280 / 0.35 * 0.35, 8) == 1280

    def test_hard_activations(self):
        x = tf.constant([-4.0, -3.0, -1.5, 0.0, 1.5, 3.0, 4.0])
        np.testing.assert_allclose(conv_blocks.hard_swish(x),
                                   [0, 0, -0.375, 0, 1.125, 3, 4], atol=1e-6)
        np.testing.assert_allclose(conv_blocks.hard_sigmoid(x),
                                   np.clip(x + 3, 0, 6) * 0.16667, rtol=1e-7)
        assert conv_blocks.hard_swish(tf.cast(x, tf.bfloat16)).dtype == tf.bfloat16

    def test_expanded_conv_computes_slims_block(self):
        options = dict(weights_initializer=layers.truncated_normal_initializer(0.5),
                       weight_decay=0.0, normalizer=layers.BatchNormParams(scale=True))
        block = conv_blocks.ExpandedConv(
            'Net/expanded_conv', input_depth=8, expansion_depth=24, num_outputs=8,
            kernel_size=3, stride=1, rate=1, activation=conv_blocks.hard_swish,
            conv_options=options, squeeze_excite=True)
        x = tf.constant(_images(6, channels=8))
        block(x, training=False)
        for variable in block.variables:  # batch-norm statistics far from the identity
            variable.assign(testing_utils.golden_weight_value(variable.name[:-2],
                                                              variable.shape))
        out, end_points = block(x, training=False)
        assert sorted(end_points) == ['depthwise_output', 'expansion_output', 'output']

        def batch_norm(t, bn):
            return (t - bn.moving_mean) / tf.sqrt(bn.moving_variance + 0.001) * bn.gamma \
                + bn.beta

        expanded = conv_blocks.hard_swish(batch_norm(
            tf.nn.conv2d(x, block.expand.weights, 1, 'SAME'), block.expand.batch_norm))
        depthwise = conv_blocks.hard_swish(batch_norm(
            tf.nn.depthwise_conv2d(expanded, block.depthwise.depthwise_weights, [1] * 4,
                                   'SAME'), block.depthwise.batch_norm))
        se = block.squeeze_excite
        squeezed = tf.nn.relu(tf.nn.conv2d(tf.reduce_mean(depthwise, [1, 2], keepdims=True),
                                           se.squeeze.weights, 1, 'SAME') + se.squeeze.biases)
        gate = tf.nn.relu6(tf.nn.conv2d(squeezed, se.excite.weights, 1, 'SAME')
                           + se.excite.biases + 3) * 0.16667
        projected = batch_norm(tf.nn.conv2d(depthwise * gate, block.project.weights, 1,
                                            'SAME'), block.project.batch_norm)
        np.testing.assert_allclose(end_points['expansion_output'], expanded, atol=1e-5)
        np.testing.assert_allclose(out, projected + x, atol=1e-4)
        assert sorted(v.name for v in se.variables) == [
            'Net/expanded_conv/squeeze_excite/Conv/biases:0',
            'Net/expanded_conv/squeeze_excite/Conv/weights:0',
            'Net/expanded_conv/squeeze_excite/Conv_1/biases:0',
            'Net/expanded_conv/squeeze_excite/Conv_1/weights:0']

    def test_no_residual_across_stride_or_depth_change(self):
        options = dict(weights_initializer=layers.truncated_normal_initializer(0.1),
                       weight_decay=0.0, normalizer=layers.BatchNormParams())
        common = dict(input_depth=8, expansion_depth=48, kernel_size=3, rate=1,
                      activation=tf.nn.relu6, conv_options=options)
        assert conv_blocks.ExpandedConv('a', num_outputs=8, stride=1, **common).residual
        assert not conv_blocks.ExpandedConv('b', num_outputs=8, stride=2, **common).residual
        assert not conv_blocks.ExpandedConv('c', num_outputs=16, stride=1, **common).residual
        assert not conv_blocks.ExpandedConv('d', num_outputs=8, stride=1, residual=False,
                                            **common).residual
