r"""Imports timm's weights (a safetensors file, read without PyTorch) into the net of the
same architecture.

  python import_timm_weights.py --model_name=vit_base_16 \
      --timm_weights=hf_hub:timm/vit_base_patch16_224.augreg2_in21k_ft_in1k \
      --output_dir=/tmp/timm_vit_base_16

--timm_weights is timm's model.safetensors (config.json beside it is read when there),
a Hugging Face snapshot folder holding both, or hf_hub:<id> (downloaded through
huggingface_hub). Every tensor fills one variable of ours, none is left over; a
position embedding of another grid than --image_size's (default: the net's size) is
resampled bicubically. <output_dir>/model.ckpt-0 is written with import.json: the class
count, the class names and timm's pretrained_cfg (mean, std, crop_pct, interpolation,
input size). Pass --checkpoint_path=<output_dir> to training (fine-tuning), evaluation
and export.
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from absl import app  # noqa: E402

from cli import configs, guard, timm_import_job  # noqa: E402
from cli import flags as cli_flags  # noqa: E402

FLAG_GROUPS = ('Model', 'Image size', 'timm weights', 'Checkpoint output',
               'Existing output', 'Logging')
cli_flags.define(FLAG_GROUPS, usage=__doc__)


def main(argv):
    del argv
    return timm_import_job.run(configs.timm_import_from_flags())


if __name__ == '__main__':
    app.run(guard.guarded(main))
