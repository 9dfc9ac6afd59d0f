"""The layer kit (nets/layers/): slim's layers as modules, their names, padding,
precision and randomness."""
import numpy as np
import pytest
import tensorflow as tf

from nets import layers, nets_factory


def test_batch_norm_updates_moving_statistics_like_slim():
    bn = layers.BatchNorm('Net/BatchNorm', layers.BatchNormParams(decay=0.9, scale=True))
    x = tf.constant(np.random.default_rng(1).normal(3.0, 2.0, (8, 4, 4, 5)), tf.float32)
    y = bn(x, training=True)
    np.testing.assert_allclose(y.numpy().mean(axis=(0, 1, 2)), 0.0, atol=1e-4)
    batch_mean = x.numpy().mean(axis=(0, 1, 2))
    unbiased_var = x.numpy().var(axis=(0, 1, 2), ddof=1)
    np.testing.assert_allclose(bn.moving_mean.numpy(), 0.1 * batch_mean, rtol=1e-4)
    np.testing.assert_allclose(bn.moving_variance.numpy(), 0.9 + 0.1 * unbiased_var,
                               rtol=1e-4)
    assert sorted(v.name for v in bn.variables) == [
        'Net/BatchNorm/beta:0', 'Net/BatchNorm/gamma:0',
        'Net/BatchNorm/moving_mean:0', 'Net/BatchNorm/moving_variance:0']
    inference = bn(x, training=False).numpy()
    expected = (x.numpy() - bn.moving_mean.numpy()) / np.sqrt(
        bn.moving_variance.numpy() + 1e-3)
    np.testing.assert_allclose(inference, expected, rtol=1e-4, atol=1e-4)


def _layer_norm_reference(x, gamma, beta, epsilon):
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + epsilon) * gamma + beta


def test_layer_norm_normalises_the_last_axis_like_numpy():
    norm = layers.LayerNorm('Net/LayerNorm', epsilon=1e-6)
    x = np.random.default_rng(2).normal(3.0, 2.0, (2, 3, 4, 5)).astype(np.float32)
    norm(tf.constant(x), training=False)
    assert sorted(v.name for v in norm.variables) == ['Net/LayerNorm/beta:0',
                                                      'Net/LayerNorm/gamma:0']
    np.testing.assert_array_equal(norm.gamma.numpy(), np.ones(5))
    np.testing.assert_array_equal(norm.beta.numpy(), np.zeros(5))
    gamma, beta = np.arange(1.0, 6.0) / 2, np.arange(5.0) - 2
    norm.gamma.assign(gamma)
    norm.beta.assign(beta)
    expected = _layer_norm_reference(x, gamma, beta, 1e-6)
    for training in (False, True):  # no statistics kept: the same either way
        np.testing.assert_allclose(norm(tf.constant(x), training=training).numpy(), expected,
                                   rtol=1e-5, atol=1e-5)
    for rank in (2, 3):  # any rank: only the last axis is normalised
        flat = x.reshape(-1, 5) if rank == 2 else x.reshape(6, 4, 5)
        np.testing.assert_allclose(norm(tf.constant(flat), training=False).numpy(),
                                   expected.reshape(flat.shape), rtol=1e-5, atol=1e-5)
    bare = layers.LayerNorm('bare', epsilon=1e-3, center=False, scale=False)
    np.testing.assert_allclose(bare(tf.constant(x), training=False).numpy(),
                               _layer_norm_reference(x, 1.0, 0.0, 1e-3), rtol=1e-5, atol=1e-5)
    assert bare.variables == ()


def test_layer_norm_keeps_bfloat16_statistics_in_float32():
    # Values far from zero with a small spread: bfloat16's 8 bits cannot hold the
    # spread's digits of a mean computed in bfloat16, float32 statistics can.
    x = 100.0 + np.random.default_rng(3).normal(0.0, 1.0, (4, 64)).astype(np.float32)
    x = tf.cast(tf.cast(x, tf.bfloat16), tf.float32).numpy()  # the values bfloat16 holds
    norm = layers.LayerNorm('norm')
    low = norm(tf.cast(x, tf.bfloat16), training=False)
    assert low.dtype == tf.bfloat16
    assert {v.dtype for v in norm.variables} == {tf.float32}
    expected = _layer_norm_reference(x, 1.0, 0.0, 1e-6)
    # Only the output's rounding remains (bfloat16: 2**-8 relative).
    np.testing.assert_allclose(tf.cast(low, tf.float32).numpy(), expected, rtol=2 ** -8,
                               atol=2 ** -8)


def test_training_is_required_where_it_changes_behaviour():
    conv = layers.Conv2D('conv', 4, 3, normalizer=layers.BatchNormParams())
    with pytest.raises(TypeError, match='training'):
        conv(tf.zeros([1, 8, 8, 2]))
    with pytest.raises(TypeError, match='training'):
        layers.dropout(tf.zeros([2, 3]), 0.5)


def test_normalized_conv_has_no_biases_and_names_its_batch_norm():
    conv = layers.Conv2D('Net/conv', 4, 3, normalizer=layers.BatchNormParams())
    conv(tf.zeros([1, 8, 8, 2]), training=False)
    assert sorted(v.name for v in conv.variables) == [
        'Net/conv/BatchNorm/beta:0', 'Net/conv/BatchNorm/moving_mean:0',
        'Net/conv/BatchNorm/moving_variance:0', 'Net/conv/weights:0']
    renamed = layers.Conv2D('conv0', 4, 3, normalizer=layers.BatchNormParams(),
                            normalizer_name='conv0_bn')
    renamed(tf.zeros([1, 8, 8, 2]), training=False)
    assert 'conv0/conv0_bn/moving_mean:0' in [v.name for v in renamed.variables]


def test_keras_naming_names_kernels_and_puts_the_batch_norm_beside():
    class Block(layers.Module):
        def __init__(self):
            super().__init__('blocks_0')
            keras = dict(naming='keras', normalizer=layers.BatchNormParams(scale=True))
            self.depthwise = layers.SeparableConv2D('depthwise_conv2d', None, 3,
                                                    normalizer_name='bn', **keras)
            self.project = layers.Conv2D('sub/conv2d', 4, 1, normalizer_name='bn_1', **keras)
            self.head = layers.FullyConnected('dense', 2, naming='keras')

        def forward(self, x, *, training):
            x = self.project(self.depthwise(x, training=training), training=training)
            return self.head(tf.reduce_mean(x, [1, 2]), training=training)

    block = Block()
    block(tf.zeros([1, 4, 4, 3]), training=False)
    statistics = ('beta', 'gamma', 'moving_mean', 'moving_variance')
    assert sorted(v.name[:-2] for v in block.variables) == sorted([
        'blocks_0/depthwise_conv2d/depthwise_kernel', 'blocks_0/sub/conv2d/kernel',
        'blocks_0/dense/kernel', 'blocks_0/dense/bias',
        *[f'blocks_0/bn/{s}' for s in statistics],
        *[f'blocks_0/sub/bn_1/{s}' for s in statistics]])
    with pytest.raises(ValueError, match='naming must be one of'):
        layers.Conv2D('conv', 4, 1, naming='torch')


def test_nested_blocks_compose_relative_names():
    class Mixed(layers.Module):
        def __init__(self):
            super().__init__('Mixed_5b')
            self.branches = [
                layers.Sequential('Branch_0', [layers.Conv2D('Conv2d_0a_1x1', 4, 1)]),
                layers.Sequential('Branch_1', [
                    layers.Conv2D('Conv2d_0a_1x1', 3, 1),
                    lambda x: layers.max_pool(x, 3, 1, 'SAME'),
                    layers.Conv2D('Conv2d_0b_5x5', 5, 5,
                                  normalizer=layers.BatchNormParams())])]

        def forward(self, x, *, training):
            return tf.concat([b(x, training=training) for b in self.branches], -1)

    class Net(layers.Module):
        def __init__(self, scope):
            super().__init__(scope)
            self.mixed = Mixed()
            self.cell = layers.Conv2D('cell_0/conv', 2, 1)

        def forward(self, x, *, training):
            return self.cell(self.mixed(x, training=training), training=training)

    out = Net('InceptionV3')(tf.zeros([1, 8, 8, 2]), training=True)
    assert out.shape == [1, 8, 8, 2]
    net = Net('')  # NASNet-style root-level names
    net(tf.zeros([1, 8, 8, 2]), training=False)
    assert sorted(v.name for v in net.variables) == [
        'Mixed_5b/Branch_0/Conv2d_0a_1x1/biases:0',
        'Mixed_5b/Branch_0/Conv2d_0a_1x1/weights:0',
        'Mixed_5b/Branch_1/Conv2d_0a_1x1/biases:0',
        'Mixed_5b/Branch_1/Conv2d_0a_1x1/weights:0',
        'Mixed_5b/Branch_1/Conv2d_0b_5x5/BatchNorm/beta:0',
        'Mixed_5b/Branch_1/Conv2d_0b_5x5/BatchNorm/moving_mean:0',
        'Mixed_5b/Branch_1/Conv2d_0b_5x5/BatchNorm/moving_variance:0',
        'Mixed_5b/Branch_1/Conv2d_0b_5x5/weights:0',
        'cell_0/conv/biases:0', 'cell_0/conv/weights:0']


def test_variables_created_inside_tf_function_keep_slim_names():
    net = layers.Sequential('Outer', [layers.Conv2D('conv', 2, 3)])
    tf.function(lambda x: net(x, training=False))(tf.zeros([1, 5, 5, 1]))
    assert sorted(v.name for v in net.variables) == ['Outer/conv/biases:0',
                                                     'Outer/conv/weights:0']


@pytest.mark.parametrize('kernel, map_size, padding', [
    (7, 7, 'VALID'), (1, 1, 'SAME'), ([2, 3], [2, 3], 'VALID'), (3, 3, 'SAME')])
def test_conv_spanning_its_input_equals_the_convolution(kernel, map_size, padding):
    # A kernel spanning the map (fc-as-conv) runs as a matmul; values and gradients
    # must equal the convolution's. (3, 3, SAME) is not 1x1 out: the conv path.
    conv = layers.Conv2D('fc', 5, kernel, padding=padding, activation=None,
                         biases_initializer=None)
    size = map_size if isinstance(map_size, list) else [map_size, map_size]
    x = tf.random.stateless_normal([3, *size, 4], seed=[5, 6])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = conv(x, training=False)
        theirs = tf.nn.convolution(x, conv.weights, padding=padding)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)
    for source in (x, conv.weights):
        np.testing.assert_allclose(tape.gradient(ours, source).numpy(),
                                   tape.gradient(theirs, source).numpy(),
                                   rtol=1e-5, atol=1e-5)


def test_conv3d_and_3d_pooling():
    conv = layers.Conv3D('Conv3d_1a_7x7', 8, [3, 7, 7], stride=2,
                         normalizer=layers.BatchNormParams())
    out = conv(tf.zeros([2, 8, 32, 32, 3]), training=True)
    assert out.shape == [2, 4, 16, 16, 8]
    assert conv.weights.shape == [3, 7, 7, 3, 8]
    assert layers.max_pool(out, [1, 3, 3], [1, 2, 2], 'SAME').shape == [2, 4, 8, 8, 8]


@pytest.mark.parametrize('size', [7, 8])
@pytest.mark.parametrize('stride, rate', [(1, 1), (2, 1), (1, 2)])
def test_conv2d_same_pads_as_slim(size, stride, rate):
    conv = layers.conv2d_same('conv', 2, 3, stride=stride, rate=rate,
                              activation=None, biases_initializer=None)
    x = tf.random.stateless_normal([1, size, size, 2], seed=[1, 2])
    out = conv(x, training=False)
    # slim: stride 1 is plain SAME; otherwise pad (k_eff - 1) split begin-first, VALID.
    if stride == 1:
        expected = tf.nn.conv2d(x, conv.weights, 1, 'SAME', dilations=rate)
    else:
        k_eff = 3 + 2 * (rate - 1)
        begin = (k_eff - 1) // 2
        padded = tf.pad(x, [[0, 0], [begin, k_eff - 1 - begin],
                            [begin, k_eff - 1 - begin], [0, 0]])
        expected = tf.nn.conv2d(padded, conv.weights, stride, 'VALID', dilations=rate)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
    assert out.shape[1] == -(-size // stride)


def test_separable_conv_variables():
    sep = layers.SeparableConv2D('Net/sep', 6, 3, depth_multiplier=2)
    out = sep(tf.zeros([1, 8, 8, 3]), training=False)
    assert out.shape == [1, 8, 8, 6]
    shapes = {v.name: v.shape.as_list() for v in sep.variables}
    assert shapes == {'Net/sep/depthwise_weights:0': [3, 3, 3, 2],
                      'Net/sep/pointwise_weights:0': [1, 1, 6, 6],
                      'Net/sep/biases:0': [6]}
    depthwise = layers.SeparableConv2D('Net/dw', None, 3, stride=2)
    assert depthwise(tf.zeros([1, 8, 8, 3]), training=False).shape == [1, 4, 4, 3]


@pytest.mark.parametrize('dtype', [tf.bfloat16, tf.float16])
def test_low_precision_compute_keeps_float32_variables(dtype):
    conv = layers.Conv2D('conv', 4, 3, normalizer=layers.BatchNormParams(scale=True))
    fc = layers.FullyConnected('fc', 3)
    x = tf.random.stateless_normal([4, 6, 6, 2], seed=[3, 4])
    out = fc(layers.flatten(conv(tf.cast(x, dtype), training=True)), training=True)
    assert out.dtype == dtype
    assert {v.dtype for v in conv.variables + fc.variables} == {tf.float32}
    assert conv.batch_norm.moving_mean.numpy().any()  # statistics were updated


def test_layers_keep_names_under_mirrored_strategy():
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
    with strategy.scope():
        net = nets_factory.get_network_fn('lenet', 10)
        net.build([28, 28, 1])
    names = sorted(v.name for v in net.variables)
    assert names[0] == 'LeNet/conv1/biases:0'
    assert all(isinstance(v, tf.distribute.DistributedValues) for v in net.variables)


def test_dropout_draws_its_masks_from_the_generator_it_is_given():
    inputs = tf.ones([64, 32])

    def masks(generator):
        return [layers.dropout(inputs, 0.5, training=True, random_generator=generator).numpy()
                for _ in range(2)]

    first, second = masks(tf.random.Generator.from_seed(7))
    assert not np.array_equal(first, second)  # the generator moves on
    np.testing.assert_array_equal(masks(tf.random.Generator.from_seed(7))[0], first)
    assert set(np.unique(first)) == {0.0, 2.0}
    generator = tf.random.Generator.from_seed(7)
    np.testing.assert_array_equal(
        layers.dropout(inputs, 0.5, training=False, random_generator=generator), inputs)
    assert generator.state.numpy().tolist() == \
        tf.random.Generator.from_seed(7).state.numpy().tolist()  # nothing drawn
    assert layers.dropout(inputs, 0.5, training=True).shape == inputs.shape  # global seed


def test_apply_gives_training_to_modules_only():
    conv = layers.Conv2D('conv', 2, 1, normalizer=layers.BatchNormParams())
    x = tf.ones([1, 2, 2, 3])
    assert layers.apply(conv, x, training=True).shape == [1, 2, 2, 2]
    assert layers.apply(tf.nn.relu, -x, training=True).numpy().max() == 0.0
