"""The import's mistakes, each one line (UsageError), in-process: another
architecture's file (the first tensor that does not fit named), a file missing a
tensor, a config.json of another architecture or class count, an unsupported net, an
existing output, hf_hub: without huggingface_hub or offline; and the catalog's
families."""
import json
import pathlib
import shutil
import sys
import types

import numpy as np
import pytest

from cli import timm_import_job
from core.errors import UsageError
from nets.timm_import import catalog, files, mapping, safetensors, transfer

GOLDENS = pathlib.Path(__file__).resolve().parents[2] / 'data' / 'timm'


def _bare_copy(tmp_path, case, edit=None):
    """The case's weights alone (no config.json), optionally edited."""
    tensors = safetensors.read(str(GOLDENS / case / 'model.safetensors'))
    if edit:
        edit(tensors)
    path = tmp_path / f'{case}.safetensors'
    safetensors.write(str(path), tensors)
    return files.locate(str(path))


def test_a_file_of_another_architecture_names_the_first_tensor_that_does_not_fit(tmp_path):
    located = _bare_copy(tmp_path, 'convnext_tiny')
    with pytest.raises(UsageError) as error:
        transfer.import_into_ours('vit_tiny_16', catalog.get('vit_tiny_16'), located, 32)
    assert str(error.value) == (
        "The file is no vit_tiny_16 (vit_tiny_patch16_224, vit_tiny_patch16_384, "
        "deit_tiny_patch16_224): its tensor 'head.fc.bias' [7] fits no variable of "
        "vit_tiny_16; pass weights of that architecture, or the --model_name they are of.")


def test_a_file_missing_a_tensor_names_the_variable_left_empty(tmp_path):
    located = _bare_copy(tmp_path, 'vit_tiny_16',
                         lambda tensors: tensors.pop('blocks.11.mlp.fc2.bias'))
    with pytest.raises(UsageError, match=r'^The file is no vit_tiny_16 .*: it holds no '
                                         r'tensor for vit_tiny_16/block_11/mlp/fc_2/biases;'):
        transfer.import_into_ours('vit_tiny_16', catalog.get('vit_tiny_16'), located, 32)


def test_a_config_of_another_class_count_is_refused(tmp_path):
    folder = tmp_path / 'snapshot'
    shutil.copytree(GOLDENS / 'vit_tiny_16', folder)
    config = json.loads((folder / 'config.json').read_text())
    (folder / 'config.json').write_text(json.dumps(dict(config, num_classes=1000)))
    with pytest.raises(UsageError, match=r'config.json says 1000 classes, its head.weight '
                                         r'has 10 rows'):
        transfer.import_into_ours('vit_tiny_16', catalog.get('vit_tiny_16'),
                                  files.locate(str(folder)), 32)


def test_other_nets_are_refused_listing_the_supported_ones():
    with pytest.raises(UsageError, match=r'^--model_name=resnet_v1_50 has no timm model of '
                                         r'its architecture here; timm weights import into: '
                                         r'convnext_base, .*, vit_tiny_16\.$'):
        catalog.get('resnet_v1_50')


def test_the_catalog_finds_every_family_module():
    names = catalog.names()
    assert {'vit_tiny_16', 'dinov2_small_14_reg4', 'convnext_tiny'} <= set(names)
    assert all(isinstance(catalog.get(n), mapping.TimmFamily) for n in names)


def test_an_existing_output_needs_overwrite(tmp_path):
    (tmp_path / 'out').mkdir()
    (tmp_path / 'out' / 'model.ckpt-0.index').write_text('')
    job = timm_import_job.TimmImportJob('vit_tiny_16', str(GOLDENS / 'vit_tiny_16'),
                                        str(tmp_path / 'out'))
    with pytest.raises(UsageError, match='is not empty; pass --overwrite'):
        timm_import_job.run(job)


def test_hf_hub_without_the_package_or_offline_names_the_files_to_put_where(monkeypatch):
    monkeypatch.setitem(sys.modules, 'huggingface_hub', None)
    with pytest.raises(UsageError, match=r'needs the huggingface_hub package, which is not '
                                         r'installed; without it, download a folder holding '
                                         r'its model.safetensors and config.json'):
        files.locate('hf_hub:timm/vit_tiny_patch16_224.augreg_in21k_ft_in1k')

    def offline(*args, **kwargs):
        raise ConnectionError('Failed to resolve huggingface.co')

    monkeypatch.setitem(sys.modules, 'huggingface_hub',
                        types.SimpleNamespace(snapshot_download=offline))
    with pytest.raises(UsageError) as error:
        files.locate('hf_hub:timm/vit_tiny_patch16_224.augreg_in21k_ft_in1k')
    assert str(error.value) == (
        'Could not download hf_hub:timm/vit_tiny_patch16_224.augreg_in21k_ft_in1k (Failed '
        'to resolve huggingface.co); offline, put a folder holding its model.safetensors '
        'and config.json (from https://huggingface.co/timm/'
        'vit_tiny_patch16_224.augreg_in21k_ft_in1k/tree/main), passed as --timm_weights.')


def test_layouts_follow_our_roles():
    conv = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)  # OIHW
    assert mapping.to_our_layout(conv, 'weights', 4).shape == (4, 5, 3, 2)
    assert mapping.to_our_layout(conv[:, :1], 'depthwise_weights', 4).shape == (4, 5, 2, 1)
    square = np.arange(9, dtype=np.float32).reshape(3, 3)
    np.testing.assert_array_equal(mapping.to_our_layout(square, 'weights', 2), square.T)
    one_by_one = square.reshape(3, 3, 1, 1)
    np.testing.assert_array_equal(mapping.to_our_layout(one_by_one, 'weights', 2), square.T)
    row = square[0]
    assert mapping.to_our_layout(row, 'gamma', 1) is row
