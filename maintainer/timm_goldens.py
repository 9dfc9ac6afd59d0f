r"""Writes the timm goldens under tests/data/timm/: timm's own model, seeded random
weights, its logits, for tests/nets/timm_import/ and tests/e2e/test_import_timm_weights.py
to compare ours with (CI needs neither PyTorch nor timm).

  /work/timm_venv/bin/python maintainer/timm_goldens.py   # torch (CPU) + timm 1.0.31
  /work/timm_venv/bin/python maintainer/timm_goldens.py convnext_v2_atto  # named cases

For each case a directory tests/data/timm/<case>/ holds
  model.safetensors  every parameter of `timm.create_model(architecture, **kwargs)`,
                     drawn from a seeded normal (weights ~ N(0, 1/fan_in), norms'
                     weights 1 + N(0, 0.1^2), biases, layer scales and tokens random too,
                     so no part of the net is an identity), rounded to float16 first (to
                     bfloat16 for the BF16 case), so the stored file is exact and small;
  config.json        as timm's push_to_hub writes it: architecture, num_classes,
                     label_names (made up), pretrained_cfg of that architecture;
  input.npy          seeded normal images [2, height, width, 3], float32 (NHWC);
  logits.npy         timm's output on them in eval mode, float32 (features for a model
                     without a classifier);
  case.json          what the test builds: our net, kwargs given to timm, sizes.
`case['import_size']` differing from `case['timm_kwargs']['img_size']`: the logits are
those of timm's model at import_size after timm's own checkpoint_filter_fn resampled the
position embedding of the stored grid (timm's load path), which ours must reproduce.

Cases are the smallest variant of each family. `vit_tiny_16` is the whole registered
net (through import_timm_weights.py; 10 classes, 32x32 to keep the file at 11 MB);
DINOv2 and ConvNeXt keep their architecture with fewer and narrower blocks (timm's
depth / embed_dim, depths / dims kwargs; ours built with the same numbers), because
their smallest variants would take 44-57 MB; ConvNeXt V2's atto is reduced the same way
(7 MB whole; its 1x1-conv MLP layout kept). `mobilenet_v4_conv_small` is the whole registered net (10 classes,
64x64, 5 MB), its batch norms' running statistics drawn too (`statistics`) and their
int64 num_batches_tracked stored as timm's own files store them; the hybrids' Mobile MQA
(`mobilenet_v4_hybrid_large`) on timm's MobileNetV4 class with a small block table of
every block kind (`arch_def`; ours built from the same table, `ours`). Also
position_embedding.npz: timm's resample_abs_pos_embed of a seeded embedding onto larger
and smaller grids.
"""
import json
import os
import sys

import numpy as np
import safetensors.torch
import timm
import torch
from timm.layers import resample_abs_pos_embed
from timm.models import mobilenetv3, vision_transformer
from timm.models._efficientnet_builder import (decode_arch_def, resolve_act_layer,
                                               round_channels)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, 'tests', 'data', 'timm')
SEED = 20261207

CASES = {
    'vit_tiny_16': dict(architecture='vit_tiny_patch16_224', model_name='vit_tiny_16',
                        timm_kwargs=dict(img_size=32, num_classes=10), dtype='F16'),
    'dinov2_small_14': dict(
        architecture='vit_small_patch14_dinov2', model_name='dinov2_small_14',
        timm_kwargs=dict(img_size=56, depth=2, embed_dim=96, num_heads=6),
        import_size=28, dtype='F32',
        ours=dict(depth=96, num_blocks=2, num_heads=6)),
    'dinov2_small_14_reg4': dict(
        architecture='vit_small_patch14_reg4_dinov2', model_name='dinov2_small_14_reg4',
        timm_kwargs=dict(img_size=42, depth=2, embed_dim=96, num_heads=6),
        dtype='F16', ours=dict(depth=96, num_blocks=2, num_heads=6)),
    'convnext_tiny': dict(
        architecture='convnext_tiny', model_name='convnext_tiny',
        timm_kwargs=dict(depths=(1, 2, 1, 1), dims=(16, 32, 48, 64), num_classes=7),
        image_size=64, dtype='BF16',
        ours=dict(depths=(16, 32, 48, 64), blocks_per_stage=(1, 2, 1, 1))),
    # ConvNeXt V2's atto with fewer, narrower blocks: still timm's 1x1-conv MLP layout.
    'convnext_v2_atto': dict(
        architecture='convnextv2_atto', model_name='convnext_v2_atto',
        timm_kwargs=dict(depths=(1, 1, 2, 1), dims=(16, 24, 32, 48), num_classes=7),
        image_size=64, dtype='F16',
        ours=dict(depths=(16, 24, 32, 48), blocks_per_stage=(1, 1, 2, 1),
                  layer_scale_init=None, global_response_norm=True)),
    # The whole registered net (10 classes: 5 MB), batch norms' statistics drawn too,
    # their int64 step counters kept as timm's files keep them.
    'mobilenet_v4_conv_small': dict(
        architecture='mobilenetv4_conv_small', model_name='mobilenet_v4_conv_small',
        timm_kwargs=dict(num_classes=10), image_size=64, dtype='F16', statistics=True),
    # timm's MobileNetV4 class (hybrid_large's GELU and layer scale) on a small table of
    # every block kind, Mobile MQA with and without key/value downsampling; 72x72 puts
    # odd sizes before the stride-2 convs.
    'mobilenet_v4_hybrid_large': dict(
        architecture='mobilenetv4_hybrid_large', model_name='mobilenet_v4_hybrid_large',
        arch_def=[['er_r1_k3_s2_e4_c16'],
                  ['uir_r1_a3_k5_s2_e4_c24', 'uir_r1_a3_k3_s1_e2_c24'],
                  ['uir_r1_a3_k5_s2_e4_c32', 'mqa_r1_k3_h2_s1_v2_d16_c32',
                   'uir_r1_a0_k0_s1_e2_c32', 'uir_r1_a3_k0_s1_e4_c32'],
                  ['uir_r1_a5_k5_s2_e4_c48', 'mqa_r1_k3_h4_s1_d16_c48',
                   'uir_r1_a0_k3_s1_e4_c48'],
                  ['cn_r1_k1_s1_c64']],
        mnv4=dict(stem_size=16, num_features=96, activation='gelu', layer_scale_init=1e-5),
        timm_kwargs=dict(num_classes=5), image_size=72, dtype='F16', statistics=True,
        ours=dict(stem_depth=16, head_depth=96, activation='gelu', layer_scale_init=1e-5,
                  stages=[[['fused', 3, 2, 4, 16]],
                          [['uib', 3, 5, 2, 4, 24], ['uib', 3, 3, 1, 2, 24]],
                          [['uib', 3, 5, 2, 4, 32], ['mqa', 2, 16, 2, 32],
                           ['uib', 0, 0, 1, 2, 32], ['uib', 3, 0, 1, 4, 32]],
                          [['uib', 5, 5, 2, 4, 48], ['mqa', 4, 16, 1, 48],
                           ['uib', 0, 3, 1, 4, 48]],
                          [['conv', 1, 1, 64]]])),
}


def _reduced_mobilenet_v4(case):
    """timm's MobileNetV4 (its MobileNetV3 class with a head norm, as timm's
    _gen_mobilenet_v4 builds every variant) on the case's own block table."""
    options = case['mnv4']
    return mobilenetv3._create_mnv3(
        case['architecture'], False, block_args=decode_arch_def(case['arch_def']),
        head_bias=False, head_norm=True, num_features=options['num_features'],
        stem_size=options['stem_size'], round_chs_fn=round_channels,
        norm_layer=torch.nn.BatchNorm2d,
        act_layer=resolve_act_layer({}, options['activation']),
        layer_scale_init_value=options['layer_scale_init'], **case['timm_kwargs'])


def _randomise(model, generator, dtype):
    """Every parameter drawn anew (see the docstring), rounded to the stored dtype."""
    for name, parameter in model.named_parameters():
        shape = parameter.shape
        noise = torch.randn(shape, generator=generator)
        if parameter.ndim >= 2 and 'token' not in name and 'pos_embed' not in name:
            fan_in = int(np.prod(shape[1:]))
            value = noise / np.sqrt(fan_in)
        elif name.endswith('.weight') and parameter.ndim == 1:  # norms
            value = 1 + 0.1 * noise
        elif 'gamma' in name:  # layer scales
            value = 0.5 + 0.1 * noise
        else:  # biases, tokens, position embeddings
            value = 0.2 * noise if parameter.ndim == 1 else 0.5 * noise
        rounded = value.to(torch.bfloat16 if dtype == 'BF16' else torch.float16)
        with torch.no_grad():
            parameter.copy_(rounded.to(torch.float32))


def _randomise_statistics(model, generator, dtype):
    """Batch norms' running means ~ N(0, 0.1^2) and variances ~ exp(N(0, 0.2^2)),
    rounded to the stored dtype (timm's defaults 0 and 1 would leave them untested)."""
    for name, buffer in model.named_buffers():
        noise = torch.randn(buffer.shape, generator=generator)
        if name.endswith('running_mean'):
            value = 0.1 * noise
        elif name.endswith('running_var'):
            value = torch.exp(0.2 * noise)
        else:
            continue
        with torch.no_grad():
            buffer.copy_(value.to(torch.bfloat16 if dtype == 'BF16' else torch.float16)
                         .to(torch.float32))


def _config(model, architecture, num_classes):
    cfg = dict(model.pretrained_cfg)
    keep = ('architecture', 'tag', 'input_size', 'interpolation', 'crop_pct', 'crop_mode',
            'mean', 'std', 'num_classes', 'pool_size', 'first_conv', 'classifier')
    cfg = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items() if k in keep}
    config = {'architecture': architecture, 'num_classes': num_classes,
              'num_features': model.num_features, 'pretrained_cfg': cfg}
    if num_classes:
        config['label_names'] = [f'class_{i}' for i in range(num_classes)]
    return config


def write_case(name, case, seed):
    generator = torch.Generator().manual_seed(seed)
    model = (_reduced_mobilenet_v4(case) if 'arch_def' in case else
             timm.create_model(case['architecture'], pretrained=False, **case['timm_kwargs']))
    model.eval()
    _randomise(model, generator, case['dtype'])
    if case.get('statistics'):
        _randomise_statistics(model, generator, case['dtype'])
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    size = case.get('image_size') or case['timm_kwargs']['img_size']
    import_size = case.get('import_size', size)
    evaluated = model
    if import_size != size:  # timm's load path onto another grid
        evaluated = timm.create_model(case['architecture'], pretrained=False,
                                      **dict(case['timm_kwargs'], img_size=import_size))
        evaluated.load_state_dict(vision_transformer.checkpoint_filter_fn(
            dict(state), evaluated))
        evaluated.eval()
    images = torch.randn((2, 3, import_size, import_size), generator=generator)
    with torch.no_grad():
        logits = evaluated(images).numpy().astype(np.float32)
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    stored = {k: v.to(torch.bfloat16 if case['dtype'] == 'BF16' else
                      torch.float16 if case['dtype'] == 'F16' else torch.float32)
              if v.is_floating_point() else v for k, v in state.items()}
    safetensors.torch.save_file(stored, os.path.join(folder, 'model.safetensors'))
    with open(os.path.join(folder, 'config.json'), 'w') as f:
        json.dump(_config(model, case['architecture'], model.num_classes), f, indent=2)
    np.save(os.path.join(folder, 'input.npy'),
            images.permute(0, 2, 3, 1).numpy().astype(np.float32))
    np.save(os.path.join(folder, 'logits.npy'), logits)
    with open(os.path.join(folder, 'case.json'), 'w') as f:
        json.dump(dict(case, image_size=size, import_size=import_size, seed=seed,
                       timm_version=timm.__version__), f, indent=2)
    print(f'{name}: {sum(v.numel() for v in state.values()):,} values, logits '
          f'{logits.shape}, largest {np.abs(logits).max():.3g}')


def write_resampling(seed):
    """timm's resample_abs_pos_embed of one seeded [1, 1 + 16, 8] embedding (a class
    token and a 4x4 grid) onto 7x7 (up) and 2x2, 3x3 (down)."""
    generator = torch.Generator().manual_seed(seed)
    embedding = torch.randn((1, 1 + 16, 8), generator=generator)
    out = {'embedding': embedding.numpy()}
    for rows in (2, 3, 7):
        out[f'grid_{rows}'] = resample_abs_pos_embed(
            embedding, new_size=(rows, rows), num_prefix_tokens=1).numpy()
    np.savez(os.path.join(OUT, 'position_embedding.npz'), **out)


def main(argv):
    """Every case, or those named on the command line (each keeps its seed)."""
    torch.manual_seed(SEED)
    for index, (name, case) in enumerate(CASES.items()):
        if not argv[1:] or name in argv[1:]:
            write_case(name, case, SEED + index)
    if not argv[1:]:
        write_resampling(SEED)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
