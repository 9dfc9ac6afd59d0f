r"""Imports a Keras application's weights into the net of the same architecture.

  python import_keras_weights.py --model_name=mobilenet_v2 \
      --keras_weights=imagenet --output_dir=/tmp/keras_mobilenet_v2

--keras_weights is a .h5 or .weights.h5 file of the Keras application matching
--model_name, or imagenet (Keras's ImageNet weights, downloaded into Keras's cache).
Every Keras tensor is copied once, batch-norm statistics included; the net must then
give the Keras model's logits on a seeded input before <output_dir>/model.ckpt-0 is
written. Pass --checkpoint_path=<output_dir> to training (fine-tuning), evaluation and
export (1,000 classes: --labels_offset=1 on imagenet).
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from absl import app  # noqa: E402

from cli import configs, guard, import_weights_job  # noqa: E402
from cli import flags as cli_flags  # noqa: E402

FLAG_GROUPS = ('Model', 'Keras weights', 'Checkpoint output', 'Existing output', 'Logging')
cli_flags.define(FLAG_GROUPS, usage=__doc__)


def main(argv):
    del argv
    return import_weights_job.run(configs.import_from_flags())


if __name__ == '__main__':
    app.run(guard.guarded(main))
