r"""Writes tests/data/timm/preprocessing.npz: timm's evaluation transform of
tests/data/preprocessing/image_0.png under each of our ViT families' pretrained_cfg,
for tests/preprocessing/test_vit_preprocessing.py (CI needs neither timm nor PIL).

  /work/timm_venv/bin/python maintainer/timm_preprocessing_goldens.py   # timm 1.0.31

Per family (its timm architecture in FAMILIES): timm's resolve_data_config of the
model, input_size set to SIZE, then create_transform(**config) on the PIL image: the
shorter side resized to floor(SIZE / crop_pct) with PIL's bicubic, the centre
SIZE x SIZE crop, (x / 255 - mean) / std; stored HWC float32. The weights' goldens are
maintainer/timm_goldens.py's.
"""
import os

import numpy as np
import timm
from PIL import Image
from timm.data import create_transform, resolve_data_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHOTO = os.path.join(ROOT, 'tests', 'data', 'preprocessing', 'image_0.png')
OUTPUT = os.path.join(ROOT, 'tests', 'data', 'timm', 'preprocessing.npz')
FAMILIES = {'vit': 'vit_tiny_patch16_224', 'dinov2': 'vit_small_patch14_dinov2'}
SIZE = 112


def main():
    photo = Image.open(PHOTO).convert('RGB')
    out = {}
    for family, architecture in FAMILIES.items():
        config = resolve_data_config({}, model=timm.create_model(architecture))
        config['input_size'] = (3, SIZE, SIZE)
        out[family] = create_transform(**config)(photo).permute(1, 2, 0).numpy()
        print(family, architecture, {k: config[k] for k in ('crop_pct', 'mean', 'std',
                                                              'interpolation')})
    np.savez(OUTPUT, **out)


if __name__ == '__main__':
    main()
