r"""Exports a classifier for serving and mobile, each format checked against the model.

  python export_inference_graph.py --model_name=cifarnet --dataset_name=shapes \
      --dataset_dir=/tmp/shapes --checkpoint_path=/tmp/train --export_dir=/tmp/export \
      --export_format=saved_model,frozen_graph,tflite,tflite_int8 --include_preprocessing

Formats: saved_model (signatures 'serving_default' on preprocessed float images and,
with --include_preprocessing, 'serving_bytes' on encoded images), graphdef (slim's
inference graph, no weights), frozen_graph (weights folded in; placeholder 'input'),
tflite and tflite_int8. After each is written it is reloaded and run on
--num_parity_examples images next to the model; one out of tolerance fails the export
and is removed. TF-Slim's --output_file alone writes the frozen graph there, and its
--batch_size is --graph_batch_size.
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from absl import app  # noqa: E402

from cli import configs, export_job, guard  # noqa: E402
from cli import flags as cli_flags  # noqa: E402

FLAG_GROUPS = ('Model', 'Dataset', 'Weights', 'Quantization', 'Exported model',
               'Export formats', 'Existing output', 'Parity check', 'Logging')
cli_flags.define(FLAG_GROUPS, usage=__doc__)


def main(argv):
    del argv
    return export_job.run(configs.export_from_flags())


if __name__ == '__main__':
    app.run(guard.guarded(main))
