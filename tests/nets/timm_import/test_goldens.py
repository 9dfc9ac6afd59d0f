"""Our nets against timm's logits (tests/data/timm, written by maintainer/timm_goldens.py
with seeded random weights): the smallest variant of each family imported through the
mapping gives timm's logits within 1e-4 relative, DINOv2's position embedding resampled
from the stored grid as timm's load path does."""
import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from nets import convnext
from nets.timm_import import catalog, files, mapping, safetensors, transfer
from nets.vit import model as vit_model
from nets.vit import position_embedding

GOLDENS = pathlib.Path(__file__).resolve().parents[2] / 'data' / 'timm'
TOLERANCE = 1e-4  # of the largest logit


def _case(name):
    return json.loads((GOLDENS / name / 'case.json').read_text())


def _reduced_net(case, num_classes):
    """Our net built with the numbers timm's model was reduced to (case['ours'])."""
    name = case['model_name']
    if name.startswith('dinov2'):
        registers = name.endswith('_reg4')
        return vit_model.VisionTransformer(
            num_classes, patch_size=14, scope=name, layer_scale_init=1e-5,
            num_register_tokens=4 if registers else 0, embed_prefix_tokens=not registers,
            **case['ours'])
    return convnext.ConvNeXt(num_classes, scope=name, **case['ours'])


def _imported(name):
    case = _case(name)
    family = catalog.get(case['model_name'])
    located = files.locate(str(GOLDENS / name))
    tensors = safetensors.read(located.weights)
    classes = transfer.num_classes_of(family, located, tensors)
    size = case['import_size']
    if 'ours' in case:
        network = _reduced_net(case, classes)
        network(tf.zeros([1, size, size, 3]), training=False)
    else:
        network = transfer.build_ours(case['model_name'], classes, size)
    moved = mapping.pair(family, network, case['model_name'], tensors)
    moved.copy()
    return network, moved


def _relative_difference(network, name):
    images = np.load(GOLDENS / name / 'input.npy')
    theirs = np.load(GOLDENS / name / 'logits.npy')
    ours = network(tf.constant(images), training=False)[0].numpy()
    assert ours.shape == theirs.shape
    return np.abs(ours - theirs).max() / np.abs(theirs).max()


@pytest.mark.parametrize('name', ['vit_tiny_16', 'dinov2_small_14', 'dinov2_small_14_reg4',
                                  'convnext_tiny'])
def test_logits_equal_timms(name):
    network, moved = _imported(name)
    assert _relative_difference(network, name) < TOLERANCE
    assert len(moved.assignments) == moved.num_tensors and not moved.ignored


def test_dinov2_is_resampled_from_the_stored_grid_and_reported():
    case = _case('dinov2_small_14')
    assert case['timm_kwargs']['img_size'] != case['import_size']  # 4x4 stored, 2x2 ours
    _, moved = _imported('dinov2_small_14')
    assert moved.resampled == ['dinov2_small_14/position_embedding: the 4x4 grid '
                               'resampled to 2x2 (bicubic, as timm\'s resample_abs_pos_embed)']
    assert 'the 4x4 grid resampled to 2x2' in moved.report()


@pytest.mark.parametrize('rows', [2, 3, 7])
def test_position_embedding_resampling_equals_timms(rows):
    """Up (4x4 -> 7x7, fine-tuning at a larger size) and down (DINOv2's 518 grid at 224)."""
    stored = np.load(GOLDENS / 'position_embedding.npz')
    ours = position_embedding.resample_array(stored['embedding'], (rows, rows), 1)
    np.testing.assert_allclose(ours, stored[f'grid_{rows}'], rtol=0, atol=2e-6)


def test_the_stored_weights_are_float16_exact():
    """As maintainer/timm_goldens.py says: the files are exact and small."""
    header, _ = safetensors.read_header(str(GOLDENS / 'vit_tiny_16' / 'model.safetensors'))
    assert {entry['dtype'] for entry in header.values()} == {'F16'}
    tensors = safetensors.read(str(GOLDENS / 'dinov2_small_14' / 'model.safetensors'))
    for value in tensors.values():
        np.testing.assert_array_equal(value.astype(np.float16).astype(np.float32), value)


# timm 1.0.31's parameter counts (`sum(p.numel() for p in timm.create_model(name)
# .parameters())`, 1,000 classes), the same as Keras's.
CONVNEXT_PARAMETERS = {'convnext_tiny': 28_589_128, 'convnext_small': 50_223_688,
                       'convnext_base': 88_591_464, 'convnext_large': 197_767_336,
                       'convnext_xlarge': 350_196_968}


@pytest.mark.slow
@pytest.mark.parametrize('name', list(CONVNEXT_PARAMETERS))
def test_convnext_parameter_counts_equal_timms(name):
    network = transfer.build_ours(name, 1000, 32)
    assert sum(v.shape.num_elements() for v in network.variables) == \
        CONVNEXT_PARAMETERS[name]
