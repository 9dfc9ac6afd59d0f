"""PNASNet-5 as in TF-Slim (Liu et al. 2018, "Progressive Neural Architecture Search",
arXiv 1712.00559): NASNet's ImageNet stem and body with one searched cell, which
reduces by running strided at each third of the net instead of a separate reduction
cell. The cell is data in nets/nasnet/cells.py, the network in cell_network.py.

slim's quirks kept: no outer variable scope; the stem cells are PNASNet cells; the
auxiliary head exists in nets built for training only; without
`skip_reduction_layer_input` a reducing cell reads the same earlier output as the cell
before it; drop-path is off at step 0.
"""
from typing import List

from nets.nasnet import cell_network, cells
from nets.nasnet.cell_network import (IMAGENET_BATCH_NORM, CellNetwork, CellPlacement,
                                      Config, imagenet_stem_cells)
from nets.nasnet.cells import PNASNET_5
from nets.registry import register_network

LARGE = Config(stem_multiplier=3.0, num_cells=12, num_conv_filters=216,
               dense_dropout_keep_prob=0.5, drop_path_keep_prob=0.6, use_aux_head=True,
               skip_reduction_layer_input=True, total_training_steps=250000)
MOBILE = Config(stem_multiplier=1.0, num_cells=9, num_conv_filters=54,
                dense_dropout_keep_prob=0.5, drop_path_keep_prob=1.0, use_aux_head=True,
                skip_reduction_layer_input=True, total_training_steps=250000)


def pnasnet_plan(config: Config) -> List[CellPlacement]:
    """slim's _build_pnasnet_base as a list of cells."""
    plan = imagenet_stem_cells(config, PNASNET_5)
    num_states = 2 + len(plan)
    reductions = config.reduction_indices()
    aux_cell = reductions[1] - 1 if len(reductions) >= 2 else None
    scaling, prev = 1.0, num_states - 2
    for number in range(config.num_cells):
        reduces = number in reductions
        if reduces:
            scaling *= config.filter_scaling_rate
        if config.skip_reduction_layer_input or not reduces:
            prev = num_states - 2
        plan.append(CellPlacement(f'cell_{number}', f'Cell_{number}', PNASNET_5, scaling,
                                  2 if reduces else 1, prev,
                                  aux_head=f'aux_{number}' if number == aux_cell else None))
        num_states += 1
    return plan


def _pnasnet(config, num_classes, weight_decay, is_training, options):
    spec, quantization = options.pop('spec', None), options.pop('quantization', None)
    batch_norm = options.pop('batch_norm', IMAGENET_BATCH_NORM)
    config, dropout_keep_prob = cell_network.configure(config, options)
    return CellNetwork(num_classes=num_classes, is_training=is_training, config=config,
                       options=cells.LayerOptions(weight_decay, batch_norm),
                       stem='imagenet', plan=pnasnet_plan(config),
                       dropout_keep_prob=dropout_keep_prob, spec=spec,
                       quantization=quantization)


@register_network('pnasnet_mobile', default_image_size=224, preprocessing_name='inception',
                  checkpoint_num_classes=1001,
                  checkpoint_file='pnasnet-5_mobile_2017_12_13.tar.gz',
                  drop_path_option='drop_path_keep_prob', batch_norm=IMAGENET_BATCH_NORM)
def pnasnet_mobile(num_classes=1001, weight_decay=4e-5, is_training=False,
                   **options) -> CellNetwork:
    return _pnasnet(MOBILE, num_classes, weight_decay, is_training, options)


@register_network('pnasnet_large', default_image_size=331, preprocessing_name='inception',
                  checkpoint_num_classes=1001,
                  checkpoint_file='pnasnet-5_large_2017_12_13.tar.gz',
                  drop_path_option='drop_path_keep_prob', batch_norm=IMAGENET_BATCH_NORM)
def pnasnet_large(num_classes=1001, weight_decay=4e-5, is_training=False,
                  **options) -> CellNetwork:
    return _pnasnet(LARGE, num_classes, weight_decay, is_training, options)
