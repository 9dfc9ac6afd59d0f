r"""Averages the newest checkpoints of a training into one that evaluates and exports.

  python average_checkpoints.py --checkpoint_dir=/tmp/train --num_checkpoints=5 \
      --output_dir=/tmp/train/averaged

The network's float variables (weights, batch-norm statistics, moving averages) are
averaged elementwise; the step, optimizer slots and input position are the newest
checkpoint's. --checkpoint_prefixes names the checkpoints instead. The result,
<output_dir>/model.ckpt-<newest step>, is passed to eval_image_classifier.py and
export_inference_graph.py as --checkpoint_path=<output_dir>.
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from cli import averaging_job, configs, guard  # noqa: E402
from cli import flags as cli_flags  # noqa: E402

FLAG_GROUPS = ('Checkpoint averaging', 'Checkpoint output', 'Existing output', 'Logging')
cli_flags.define(FLAG_GROUPS, usage=__doc__)


def main(argv):
    del argv
    return averaging_job.run(configs.averaging_from_flags())


if __name__ == '__main__':
    guard.run(main)
