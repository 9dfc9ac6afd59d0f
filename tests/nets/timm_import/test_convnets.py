"""ConvNeXt V2 and MobileNetV4 against timm's logits (tests/data/timm, written by
maintainer/timm_goldens.py with seeded random weights): `convnext_v2_atto` with fewer,
narrower blocks, the whole `mobilenet_v4_conv_small` and a small hybrid (timm's
MobileNetV4 class on a table of every block kind, Mobile MQA included, GELU and layer
scale as `hybrid_large`), batch norms' running statistics drawn, imported through the
mapping, give timm's logits within 1e-4 relative."""
import functools
import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from nets import convnext
from nets.mobilenet_v4 import blocks, mobilenet_v4, model
from nets.timm_import import catalog, files, mapping, safetensors, transfer

GOLDENS = pathlib.Path(__file__).resolve().parents[2] / 'data' / 'timm'
TOLERANCE = 1e-4  # of the largest logit
SPECS = {'conv': blocks.ConvSpec, 'fused': blocks.FusedSpec, 'uib': blocks.UIBSpec,
         'mqa': blocks.MQASpec}


def _reduced_net(case, num_classes):
    """Our net built from the numbers timm's model was reduced to (case['ours'])."""
    ours, name = dict(case['ours']), case['model_name']
    if name.startswith('convnext'):
        return convnext.ConvNeXt(num_classes, scope=name, **ours)
    stages = [[SPECS[kind](*numbers) for kind, *numbers in stage]
              for stage in ours.pop('stages')]
    activation = {'gelu': mobilenet_v4.GELU, 'relu': tf.nn.relu}[ours.pop('activation')]
    return model.MobileNetV4(num_classes, stages=stages, activation=activation, scope=name,
                             batch_norm=mobilenet_v4.BATCH_NORM, **ours)


@functools.lru_cache(maxsize=None)
def _imported(name):
    """(our net, the transfer) for a golden, imported once per session."""
    case = json.loads((GOLDENS / name / 'case.json').read_text())
    family = catalog.get(case['model_name'])
    located = files.locate(str(GOLDENS / name))
    transfer.check_architecture(family, case['model_name'], located)
    tensors = safetensors.read(located.weights)
    classes = transfer.num_classes_of(family, located, tensors)
    size = case['import_size']
    if 'ours' in case:  # timm's model reduced; ours built with the same numbers
        network = _reduced_net(case, classes)
        network(tf.zeros([1, size, size, 3]), training=False)
    else:
        network = transfer.build_ours(case['model_name'], classes, size)
    moved = mapping.pair(family, network, case['model_name'], tensors)
    moved.copy()
    return network, moved


@pytest.mark.parametrize('name, ignored', [('convnext_v2_atto', 0),
                                           ('mobilenet_v4_conv_small', 46),
                                           ('mobilenet_v4_hybrid_large', 33)])
def test_logits_equal_timms(name, ignored):
    network, moved = _imported(name)
    images = np.load(GOLDENS / name / 'input.npy')
    theirs = np.load(GOLDENS / name / 'logits.npy')
    ours = network(tf.constant(images), training=False)[0].numpy()
    assert ours.shape == theirs.shape
    assert np.abs(ours - theirs).max() / np.abs(theirs).max() < TOLERANCE
    # Every tensor used once; a batch norm's step counter is the only one left out.
    assert len(moved.assignments) + len(moved.ignored) == moved.num_tensors
    assert len(moved.ignored) == ignored
    assert all(n.endswith('num_batches_tracked') for n in moved.ignored)


def test_batch_norm_statistics_are_imported_as_moving_averages():
    network, _ = _imported('mobilenet_v4_conv_small')
    tensors = safetensors.read(str(GOLDENS / 'mobilenet_v4_conv_small' / 'model.safetensors'))
    assert tensors['bn1.num_batches_tracked'].shape == ()  # timm's int64 counter, read
    by_name = {v.name[:-2]: v.numpy() for v in network.variables}
    np.testing.assert_array_equal(
        by_name['mobilenet_v4_conv_small/stem/conv/BatchNorm/moving_variance'],
        tensors['bn1.running_var'])
    np.testing.assert_array_equal(
        by_name['mobilenet_v4_conv_small/stage_2/block_0/middle_depthwise/BatchNorm/'
                'moving_mean'], tensors['blocks.2.0.dw_mid.bn.running_mean'])


def test_every_variant_of_both_families_is_in_the_catalog():
    assert {name for name in catalog.names() if name.startswith(
        ('convnext_v2_', 'mobilenet_v4_'))} == {
        *(f'convnext_v2_{v}' for v in ('atto', 'femto', 'pico', 'nano', 'tiny', 'base',
                                       'large', 'huge')),
        *(f'mobilenet_v4_{v}' for v in ('conv_small', 'conv_medium', 'conv_large',
                                        'hybrid_medium', 'hybrid_large'))}
    assert catalog.get('mobilenet_v4_hybrid_large').architectures[
        'mobilenet_v4_hybrid_large'] == ('mobilenetv4_hybrid_large',)
