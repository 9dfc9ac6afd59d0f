"""NASNet-A as in TF-Slim (Zoph et al. 2017, "Learning Transferable Architectures for
Scalable Image Recognition", arXiv 1707.07012): normal cells with a reduction cell
before each third of them, the searched cells as data in nets/nasnet/cells.py, the
network they share in nets/nasnet/cell_network.py.

`nasnet_cifar` has a 3x3 conv stem; `nasnet_mobile` and `nasnet_large` a strided conv
and two reduction cells ('cell_stem_0', 'cell_stem_1'). The auxiliary head reads the
cell before the second reduction, in nets built for training only.

slim's quirks kept: no outer variable scope; cells count stem and reduction cells in
their depth for drop-path; with `skip_reduction_layer_input` the cell after a reduction
reads the same earlier output as the reduction cell; the cifar net's first cell adapts
its unchanged input at the output ('cell_0/cell_output/reduction_1'); drop-path is off
at step 0.
"""
from typing import List

from nets import layers
from nets.nasnet import cell_network, cells
from nets.nasnet.cell_network import (IMAGENET_BATCH_NORM, CellNetwork, CellPlacement,
                                      Config, imagenet_stem_cells)
from nets.nasnet.cells import NASNET_A_NORMAL, NASNET_A_REDUCTION
from nets.registry import register_network

CIFAR = Config(stem_multiplier=3.0, num_cells=18, num_conv_filters=32,
               dense_dropout_keep_prob=1.0, drop_path_keep_prob=0.6, use_aux_head=True,
               skip_reduction_layer_input=False, total_training_steps=937500)
MOBILE = Config(stem_multiplier=1.0, num_cells=12, num_conv_filters=44,
                dense_dropout_keep_prob=0.5, drop_path_keep_prob=1.0, use_aux_head=True,
                skip_reduction_layer_input=False, total_training_steps=250000)
LARGE = Config(stem_multiplier=3.0, num_cells=18, num_conv_filters=168,
               dense_dropout_keep_prob=0.5, drop_path_keep_prob=0.7, use_aux_head=True,
               skip_reduction_layer_input=True, total_training_steps=250000)

# slim's nasnet_cifar_arg_scope batch norm (ImageNet's: cell_network.IMAGENET_BATCH_NORM).
CIFAR_BATCH_NORM = layers.BatchNormParams(decay=0.9, epsilon=1e-5, scale=True)


def nasnet_plan(config: Config, imagenet_stem: bool) -> List[CellPlacement]:
    """slim's _build_nasnet_base as a list of cells: a reduction cell goes before the
    normal cell at each reduction index."""
    plan = imagenet_stem_cells(config, NASNET_A_REDUCTION) if imagenet_stem else []
    num_states = 2 + len(plan)  # 'none', the stem's first output, the stem cells'
    reductions = config.reduction_indices()
    aux_cell = reductions[1] - 1 if len(reductions) >= 2 else None
    scaling = 1.0
    for number in range(config.num_cells):
        before_reduction = num_states - 2  # slim's cell_outputs[-2] before a reduction
        if number in reductions:
            scaling *= config.filter_scaling_rate
            k = reductions.index(number)
            plan.append(CellPlacement(f'reduction_cell_{k}', f'Reduction_Cell_{k}',
                                      NASNET_A_REDUCTION, scaling, 2, num_states - 2))
            num_states += 1
        prev = before_reduction if config.skip_reduction_layer_input else num_states - 2
        plan.append(CellPlacement(f'cell_{number}', f'Cell_{number}', NASNET_A_NORMAL,
                                  scaling, 1, prev,
                                  aux_head=f'aux_{number}' if number == aux_cell else None))
        num_states += 1
    return plan


def _nasnet(config, stem, batch_norm, num_classes, weight_decay, is_training, options):
    spec, quantization = options.pop('spec', None), options.pop('quantization', None)
    batch_norm = options.pop('batch_norm', batch_norm)
    config, dropout_keep_prob = cell_network.configure(config, options)
    return CellNetwork(num_classes=num_classes, is_training=is_training, config=config,
                       options=cells.LayerOptions(weight_decay, batch_norm), stem=stem,
                       plan=nasnet_plan(config, imagenet_stem=stem == 'imagenet'),
                       dropout_keep_prob=dropout_keep_prob, spec=spec,
                       quantization=quantization)


@register_network('nasnet_cifar', default_image_size=32, preprocessing_name='cifarnet',
                  drop_path_option='drop_path_keep_prob', batch_norm=CIFAR_BATCH_NORM)
def nasnet_cifar(num_classes=10, weight_decay=5e-4, is_training=False,
                 **options) -> CellNetwork:
    return _nasnet(CIFAR, 'cifar', CIFAR_BATCH_NORM, num_classes, weight_decay,
                   is_training, options)


@register_network('nasnet_mobile', default_image_size=224, preprocessing_name='inception',
                  checkpoint_num_classes=1001,
                  checkpoint_file='nasnet-a_mobile_04_10_2017.tar.gz',
                  drop_path_option='drop_path_keep_prob', batch_norm=IMAGENET_BATCH_NORM)
def nasnet_mobile(num_classes=1001, weight_decay=4e-5, is_training=False,
                  **options) -> CellNetwork:
    return _nasnet(MOBILE, 'imagenet', IMAGENET_BATCH_NORM, num_classes, weight_decay,
                   is_training, options)


@register_network('nasnet_large', default_image_size=331, preprocessing_name='inception',
                  checkpoint_num_classes=1001,
                  checkpoint_file='nasnet-a_large_04_10_2017.tar.gz',
                  drop_path_option='drop_path_keep_prob', batch_norm=IMAGENET_BATCH_NORM)
def nasnet_large(num_classes=1001, weight_decay=5e-5, is_training=False,
                 **options) -> CellNetwork:
    return _nasnet(LARGE, 'imagenet', IMAGENET_BATCH_NORM, num_classes, weight_decay,
                   is_training, options)
