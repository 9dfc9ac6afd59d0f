"""Stochastic depth (`drop_path_rate`) of the residual families, and the drop-path mask
they share with NASNet (nets/layers/stateless.py)."""
import fnmatch
import functools
import importlib.util
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from core.errors import UsageError
from nets import convnext, inception_resnet_v2, layers, nets_factory, resnet
from nets.efficientnet.model import EfficientNet
from nets.mobilenet import conv_blocks
from nets.mobilenet_v4.model import MobileNetV4
from nets.nasnet import cells
from nets.vit.model import VisionTransformer

RATE = 0.2
# One net per family, built small: (name, options, image size). Dropout off, so that
# drop-path is the only randomness of a training forward.
FAMILIES = [
    ('resnet_v1_50', {}, 64),
    ('resnet_v2_50', {}, 64),
    ('inception_resnet_v2', dict(dropout_keep_prob=1.0, create_aux_logits=False), 96),
    ('mobilenet_v2', dict(dropout_keep_prob=1.0), 64),
    ('mobilenet_v3_small', dict(dropout_keep_prob=1.0), 64),
]
FAMILY_IDS = [name for name, _, _ in FAMILIES]
# A batch of 4: the chance that no example drops any block is below 1 % for every family
# (mobilenet_v3_small, the shallowest, keeps an example whole with probability 0.52).
BATCH = 4


def _test_module(name):
    """A module of tests/nets loaded on its own (its caches apart from the collected
    one's), to call its golden comparisons rather than repeat them."""
    path = pathlib.Path(__file__).with_name(f'{name}.py')
    spec = importlib.util.spec_from_file_location(f'drop_path_uses_{name}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _images(size, batch=BATCH, seed=(1, 2)):
    return tf.random.stateless_uniform([batch, size, size, 3], seed=seed, minval=-1)


def _generator(seed):
    return tf.random.Generator.from_seed(seed)


# --- The mask and the schedule. ---

def test_drop_path_zeroes_whole_examples_and_scales_the_rest():
    rate = 0.9
    inputs = tf.random.stateless_normal([400, 3, 3, 2], seed=[3, 4])
    outputs = layers.drop_path(inputs, 1.0 - rate, _generator(7)).numpy()
    ratio = (outputs / inputs.numpy()).reshape(400, -1)
    kept = np.isclose(ratio, 1.0 / (1.0 - rate)).all(1)
    dropped = (outputs.reshape(400, -1) == 0.0).all(1)
    assert np.all(kept ^ dropped)  # each example whole: dropped or scaled
    assert 0.04 < kept.mean() < 0.17  # 0.1 expected; 400 draws keep this for any seed
    # The same generator state draws the same mask.
    np.testing.assert_array_equal(layers.drop_path(inputs, 1.0 - rate, _generator(7)),
                                  outputs)


def test_drop_path_mask_is_drawn_in_float32_for_bfloat16_inputs():
    inputs = tf.ones([400, 2, 2, 3], tf.bfloat16)
    outputs = layers.drop_path(inputs, 0.25, _generator(1))
    assert outputs.dtype == tf.bfloat16
    per_example = tf.cast(outputs, tf.float32).numpy().reshape(400, -1)
    assert np.all((per_example == 0.0) | (per_example == 4.0))
    assert 0.17 < (per_example[:, 0] > 0).mean() < 0.33  # 0.25 expected


def test_stochastic_depth_is_identity_at_evaluation_and_at_rate_zero():
    branch = tf.ones([2, 3])
    generator = _generator(1)
    state = generator.state.numpy()
    assert layers.stochastic_depth(branch, 0.5, training=False,
                                   random_generator=generator) is branch
    assert layers.stochastic_depth(branch, 0.0, training=True,
                                   random_generator=generator) is branch
    np.testing.assert_array_equal(generator.state.numpy(), state)  # nothing drawn


def test_nasnet_uses_the_shared_drop_path():
    assert cells.drop_path is layers.drop_path


def test_rates_are_linear_over_depth():
    rates = layers.drop_path_rates(RATE, 16)
    assert rates[0] == 0.0 and rates[-1] == RATE
    np.testing.assert_allclose(rates, np.linspace(0.0, RATE, 16), rtol=0, atol=1e-12)
    assert layers.drop_path_rates(RATE, 1) == [0.0]  # as torch.linspace(0, rate, 1)
    assert layers.drop_path_rates(RATE, 0) == []
    with pytest.raises(ValueError, match='drop_path_rate'):
        layers.drop_path_rates(1.0, 4)


def _residual_blocks(net):
    """The net's residual blocks in forward order."""
    if isinstance(net, resnet.ResNet):
        return [unit for _, units in net.blocks for unit in units]
    if isinstance(net, inception_resnet_v2.InceptionResnetV2):
        return [block for _, layer in net.blocks
                for block in getattr(layer, 'layers', [layer])
                if isinstance(block, inception_resnet_v2.ResidualBlock)]
    if isinstance(net, (convnext.ConvNeXt, VisionTransformer, MobileNetV4)):
        return net.residual_blocks
    if isinstance(net, EfficientNet):
        return [block for block in net.blocks if block.residual]
    return [layer for layer in net.base_layers
            if isinstance(layer, conv_blocks.ExpandedConv) and layer.residual]


@pytest.mark.parametrize('name, count', [
    ('resnet_v1_50', 16), ('resnet_v1_101', 33), ('resnet_v2_152', 50),
    ('inception_resnet_v2', 40), ('mobilenet_v2', 10), ('mobilenet_v3_small', 6),
    ('mobilenet_v3_large', 10), ('mobilenet_edgetpu', 15)])
def test_every_residual_block_gets_its_rate_by_depth(name, count):
    net = nets_factory.get_network_fn(name, 10, drop_path_rate=RATE)  # nothing built yet
    blocks = _residual_blocks(net)
    assert len(blocks) == count
    assert [block.drop_path_rate for block in blocks] == layers.drop_path_rates(RATE, count)
    if name.startswith('mobilenet'):  # blocks without a residual have nothing to drop
        assert all(layer.drop_path_rate == 0.0 for layer in net.base_layers
                   if isinstance(layer, conv_blocks.ExpandedConv) and not layer.residual)


# --- At rate 0: the net as before. ---

@pytest.fixture
def rate_zero_everywhere(monkeypatch):
    """nets_factory.get_network_fn with drop_path_rate=0.0 added; yields the names built."""
    built = []
    original = nets_factory.get_network_fn

    def with_rate_zero(name, *args, **options):
        built.append(name)
        return original(name, *args, drop_path_rate=0.0, **options)

    monkeypatch.setattr(nets_factory, 'get_network_fn', with_rate_zero)
    return built


@pytest.mark.parametrize('name, test_module, golden_test', [
    ('resnet_v1_50', 'test_nets', 'test_logits_match_golden'),
    pytest.param('inception_resnet_v2', 'test_nets', 'test_logits_match_golden',
                 marks=pytest.mark.slow),
    ('mobilenet_v2', 'test_mobilenet_v2_v3', 'test_logits_match_slims_original'),
    ('mobilenet_v3_small', 'test_mobilenet_v2_v3', 'test_logits_match_slims_original'),
])
def test_rate_zero_keeps_the_golden_logits(name, test_module, golden_test, slim_nets,
                                           rate_zero_everywhere):
    compare = getattr(_test_module(test_module), golden_test)
    if golden_test == 'test_logits_match_golden':
        compare(name, slim_nets)
    else:
        compare(name)
    assert rate_zero_everywhere == [name]  # the golden net was the one with the option


def _traced_training_graph(net, size, generator):
    """The ops of the net's training forward, traced (variables made on the way;
    without AutoGraph, which only slows tracing plain Python)."""
    forward = tf.function(lambda images: net(images, training=True,
                                             random_generator=generator)[0],
                          autograph=False)
    graph = forward.get_concrete_function(tf.TensorSpec([2, size, size, 3])).graph
    return [(op.name, op.type) for op in graph.get_operations()]


@pytest.mark.parametrize('name, options, size', [
    family if family[0] in ('resnet_v1_50', 'mobilenet_v2') else pytest.param(
        *family, marks=pytest.mark.slow)
    for family in FAMILIES], ids=FAMILY_IDS)
def test_rate_zero_keeps_variables_and_the_training_graph(name, options, size):
    plain = nets_factory.get_network_fn(name, 10, is_training=True, **options)
    zero = nets_factory.get_network_fn(name, 10, is_training=True, drop_path_rate=0.0,
                                       **options)
    generator = _generator(3)
    plain_ops = _traced_training_graph(plain, size, generator)
    # The same ops, by name and type: no mask drawn, nothing taken from the generator.
    assert _traced_training_graph(zero, size, generator) == plain_ops
    assert [v.name for v in zero.variables] == [v.name for v in plain.variables]


# --- At rate 0.2: paths dropped in training only. ---

# inception_resnet_v2, the largest build, in test-slow.
@pytest.mark.parametrize('name, options, size', [
    family if family[0] != 'inception_resnet_v2' else pytest.param(
        *family, marks=pytest.mark.slow)
    for family in FAMILIES], ids=FAMILY_IDS)
def test_training_drops_paths_and_evaluation_is_the_plain_net(name, options, size):
    dropping = nets_factory.get_network_fn(name, 10, is_training=True,
                                           drop_path_rate=RATE, **options)
    plain = nets_factory.get_network_fn(name, 10, is_training=True, **options)
    dropping.build((size, size, 3))
    plain.build((size, size, 3))
    assert [v.name for v in dropping.variables] == [v.name for v in plain.variables]
    for source, target in zip(dropping.variables, plain.variables):
        target.assign(source)
    images = _images(size)

    # Evaluation first: training calls move the batch-norm statistics.
    evaluated = dropping(images, training=False)[0].numpy()
    np.testing.assert_array_equal(dropping(images, training=False)[0].numpy(), evaluated)
    np.testing.assert_array_equal(plain(images, training=False)[0].numpy(), evaluated)

    def trained(net, seed):
        return net(images, training=True, random_generator=_generator(seed))[0].numpy()

    first = trained(dropping, 5)
    np.testing.assert_array_equal(trained(dropping, 5), first)  # the generator decides
    assert not np.allclose(trained(dropping, 6), first)
    assert not np.allclose(trained(plain, 5), first)  # paths were dropped
    assert not np.allclose(first, evaluated)


def test_base_draws_its_masks_from_the_generator():
    net = nets_factory.get_network_fn('mobilenet_v3_small', 10, drop_path_rate=RATE)
    images = _images(64)
    generator = _generator(9)
    state = generator.state.numpy()
    first, _ = net.base(images, training=True, random_generator=generator)
    assert not np.array_equal(generator.state.numpy(), state)
    again, _ = net.base(images, training=True, random_generator=_generator(9))
    np.testing.assert_array_equal(again.numpy(), first.numpy())


def test_bfloat16_training_forward_with_drop_path():
    net = nets_factory.get_network_fn('mobilenet_v2', 10, is_training=True,
                                      drop_path_rate=RATE, depth_multiplier=0.35)
    logits, _ = net(tf.cast(_images(64, batch=2), tf.bfloat16),
                    random_generator=_generator(2))
    assert logits.dtype == tf.bfloat16
    assert np.isfinite(tf.cast(logits, tf.float32).numpy()).all()


# --- The option as users give it. ---

FAMILIES_TEXT = ('resnet_v1_*, resnet_v2_*, inception_resnet_v2, mobilenet_v2*, '
                 'mobilenet_v3*, mobilenet_edgetpu*, convnext_*, efficientnet_b*, '
                 'efficientnet_v2_*, vit_*, dinov2_*, mobilenet_v4_*')


@pytest.mark.parametrize('name, has', [
    ('cifarnet', 'has none'), ('vgg_16', 'has none'), ('inception_v3', 'has none'),
    ('nasnet_mobile', 'has its own drop-path (its drop_path_keep_prob option)'),
    ('pnasnet_large', 'has its own drop-path (its drop_path_keep_prob option)')])
def test_nets_without_stochastic_depth_refuse_a_rate(name, has):
    with pytest.raises(UsageError) as error:
        nets_factory.get_network_fn(name, 10, drop_path_rate=RATE)
    assert str(error.value) == (f'--drop_path_rate applies to the residual families '
                                f'({FAMILIES_TEXT}); {name} {has}. Drop the flag.')


def test_unset_or_zero_rate_builds_any_net():
    net = nets_factory.get_network_fn('cifarnet', 10, drop_path_rate=0.0)
    assert net.num_classes == 10
    net = nets_factory.get_network_fn('resnet_v1_50', 10, drop_path_rate=None)
    assert all(unit.drop_path_rate == 0.0 for unit in _residual_blocks(net))


@pytest.mark.parametrize('rate', [-0.1, 1.0, 1.5, '0.2', True])
def test_rate_outside_zero_to_one_is_a_usage_error(rate):
    with pytest.raises(UsageError, match=r'^--drop_path_rate must be at least 0 and '
                                         r'below 1 .*; got .*\.$') as error:
        nets_factory.get_network_fn('resnet_v1_50', 10, drop_path_rate=rate)
    assert '\n' not in str(error.value)


def test_the_message_names_exactly_the_nets_that_take_a_rate():
    patterns = [p.strip() for p in FAMILIES_TEXT.split(',')]
    assert tuple(patterns) == nets_factory.DROP_PATH_RATE_FAMILIES
    for name in nets_factory.network_names():
        named = any(fnmatch.fnmatch(name, pattern) for pattern in patterns)
        takes = nets_factory.get_spec(name).drop_path_option == 'drop_path_rate'
        assert named == takes, name


def test_the_option_reaches_every_residual_builder():
    with_rate = functools.partial(nets_factory.get_network_fn, num_classes=10,
                                  drop_path_rate=RATE)
    for name in nets_factory.network_names():
        if nets_factory.get_spec(name).drop_path_option == 'drop_path_rate':
            net = with_rate(name)
            blocks = _residual_blocks(net)
            # EfficientNet's releases and timm's MobileNetV4: block i of all n drops
            # with RATE * i / n.
            last = (RATE * net.blocks.index(blocks[-1]) / len(net.blocks)
                    if isinstance(net, (EfficientNet, MobileNetV4)) else RATE)
            assert blocks[-1].drop_path_rate == pytest.approx(last), name
