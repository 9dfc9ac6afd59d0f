"""--layer_decay: each variable of a ViT and a ConvNeXt V2 trains at the rate its depth
says (read back from one AdamW step of unit gradients through the ModelStep); ResNet's,
EfficientNet's and MobileNet's depths; a family without depths refused in one line."""
import re

import numpy as np
import pytest
import tensorflow as tf

from core.errors import UsageError
from core.naming import slim_name
from nets import layer_depths, nets_factory
from training.loop.model_step import ModelStep
from training.loop.train_config import TrainConfig
from training.recipes import optimizers

DECAY = 0.75
RATE = 1.0  # large steps: float32 resolves them on weights near 1


def vit_depth(name):
    """timm's ViT layer ids for 12 blocks: stem 0, block i -> i + 1, the final norm with
    the last block (12), the head 13."""
    part = name.split('/')[1]
    if part in ('patch_embedding', 'class_token', 'position_embedding'):
        return 0
    block = re.fullmatch(r'block_(\d+)', part)
    return int(block.group(1)) + 1 if block else 12 if part == 'final_norm' else 13


ATTO_BLOCKS = (2, 2, 6, 2)


def convnext_depth(name):
    """timm's ConvNeXt layer ids: stem 0, blocks 1.. in order (a downsample with its
    stage's first block), the head 13 (atto: 12 blocks)."""
    parts = name.split('/')
    if parts[1] == 'stem':
        return 0
    stage = re.fullmatch(r'stage_(\d+)', parts[1])
    if not stage:
        return 13
    before = sum(ATTO_BLOCKS[:int(stage.group(1))])
    block = re.fullmatch(r'block_(\d+)', parts[2])
    return before + 1 + (int(block.group(1)) if block else 0)


def one_step(model_name, image_shape, layer_decay=DECAY):
    strategy = tf.distribute.get_strategy()
    network = nets_factory.get_network_fn(model_name, 10, is_training=True)
    # No decoupled decay: a variable's step is then its learning rate alone.
    optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig(
        'adamw', adamw_weight_decay=0.0, adamw_epsilon=1e-12, layer_decay=layer_decay))
    model_step = ModelStep(strategy=strategy, network=network, optimizer=optimizer,
                           learning_rate_fn=lambda step: RATE, image_shape=image_shape,
                           config=TrainConfig(train_dir='unused', batch_size=1),
                           with_random_generator=False)
    before = {slim_name(v): v.numpy() for v in model_step.train_variables}
    model_step.apply_gradients([(tf.ones_like(v), v) for v in model_step.train_variables],
                               RATE)
    # AdamW's first step of a unit gradient is the learning rate on every element.
    return {slim_name(v): float(np.mean(before[slim_name(v)] - v.numpy())) / RATE
            for v in model_step.train_variables}, optimizer


@pytest.mark.parametrize('model_name, image_shape, depth_of, layers', [
    ('vit_tiny_16', (32, 32, 3), vit_depth, 14),
    ('convnext_v2_atto', (32, 32, 3), convnext_depth, 14),
])
def test_each_variable_trains_at_its_depths_rate(model_name, image_shape, depth_of, layers):
    applied, optimizer = one_step(model_name, image_shape)
    expected = {name: DECAY ** (layers - 1 - depth_of(name)) for name in applied}
    assert {round(v, 4) for v in expected.values()} == {
        round(DECAY ** k, 4) for k in range(layers)}  # every depth has variables
    for name, scale in applied.items():
        assert scale == pytest.approx(expected[name], rel=1e-4), name
    assert optimizer.learning_rate_scales == pytest.approx(expected, rel=1e-9)


def test_a_net_without_depths_is_refused_in_one_line():
    with pytest.raises(UsageError, match=r'--layer_decay=0\.75 .* CifarNet does not say.*'
                                         r'drop --layer_decay'):
        one_step('cifarnet', (32, 32, 3))


def test_without_layer_decay_every_scale_is_one():
    network = nets_factory.get_network_fn('vit_tiny_16', 10, is_training=True)
    network.build((32, 32, 3))
    depths = layer_depths.layer_depths(network)
    assert depths.num_layers == 14
    assert set(depths.scales(1.0).values()) == {1.0}
    assert layer_depths.layer_depths(nets_factory.get_network_fn('lenet', 10)) is None


@pytest.mark.parametrize('model_name, expected, num_layers', [
    # 16 bottleneck units; v2's postnorm joins the last one.
    ('resnet_v1_50', {'conv1/weights': 0, 'conv1/BatchNorm/beta': 0,
                      'block1/unit_1/bottleneck_v1/conv1/weights': 1,
                      'block2/unit_1/bottleneck_v1/shortcut/weights': 4,
                      'block4/unit_3/bottleneck_v1/conv3/weights': 16, 'logits/weights': 17},
     18),
    pytest.param('resnet_v2_50', {'conv1/weights': 0, 'postnorm/gamma': 16,
                                  'block3/unit_6/bottleneck_v2/conv2/weights': 13,
                                  'logits/biases': 17}, 18,
                 marks=pytest.mark.slow),  # efficientnet_b0 joins a last block too
    # 16 blocks; the head's conv and norm join the last, the classifier is alone.
    ('efficientnet_b0', {'stem/conv2d/kernel': 0, 'blocks_0/conv2d/kernel': 1,
                         'blocks_15/se/conv2d_1/bias': 16, 'head/conv2d/kernel': 16,
                         'head/tpu_batch_normalization/gamma': 16, 'head/dense/kernel': 17},
     18),
    # 17 inverted residuals; Conv_1 (timm's conv_head) joins the last.
    pytest.param('mobilenet_v2', {'Conv/weights': 0, 'expanded_conv/project/weights': 1,
                                  'expanded_conv_16/expand/weights': 17,
                                  'Conv_1/weights': 17, 'Logits/Conv2d_1c_1x1/weights': 18},
                 19, marks=pytest.mark.slow),
    # 11 inverted residuals, then Conv_1 as a block; Conv_2 (conv_head) with the logits.
    ('mobilenet_v3_small', {'Conv/weights': 0, 'expanded_conv_10/project/weights': 11,
                            'Conv_1/weights': 12, 'Conv_2/weights': 13,
                            'Logits/Conv2d_1c_1x1/weights': 13}, 14),
])
def test_resnet_efficientnet_and_mobilenet_depths(model_name, expected, num_layers):
    network = nets_factory.get_network_fn(model_name, 10, is_training=True)
    network.build((32, 32, 3))
    depths = layer_depths.layer_depths(network)
    scope = slim_name(network.trainable_variables[0]).split('/')[0]
    assert depths.num_layers == num_layers
    assert {name: depths.depth_of[f'{scope}/{name}'] for name in expected} == expected
    assert set(depths.depth_of.values()) == set(range(num_layers))
