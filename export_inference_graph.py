r"""Exports a classifier for serving and mobile, each format checked against the model.

  python export_inference_graph.py --model_name=cifarnet --dataset_name=shapes \
      --dataset_dir=/tmp/shapes --checkpoint_path=/tmp/train --export_dir=/tmp/export \
      --export_format=saved_model,frozen_graph,tflite,tflite_int8

Formats: saved_model (signatures 'serving_default' on uint8 images of any size,
'serving_bytes' on encoded images, 'serving_tf_example' on tf.Examples, all through the
net's evaluation preprocessing, and 'serving_preprocessed' on preprocessed float
images; --include_preprocessing is accepted and changes nothing), graphdef (slim's
inference graph: placeholder 'input', variables under TF-Slim's names without values,
for freeze_graph), frozen_graph (weights folded in), tflite, tflite_int8 and
slim_checkpoint (the weights as a TF1 name-based checkpoint). After each is written it
is reloaded and run on --num_parity_examples images next to the model; one out of
tolerance fails the export and is removed. As in TF-Slim, --output_file alone writes
the inference graph there (the frozen graph given --checkpoint_path), and --batch_size
is --graph_batch_size.
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from cli import configs, export_job, guard  # noqa: E402
from cli import flags as cli_flags  # noqa: E402

FLAG_GROUPS = ('Model', 'Dataset', 'Weights', 'Quantization', 'Batch-norm statistics',
               'Image size', 'Exported model', 'Export formats', 'SavedModel', 'Existing output',
               'Parity check', 'Logging')
cli_flags.define(FLAG_GROUPS, usage=__doc__)


def main(argv):
    del argv
    return export_job.run(configs.export_from_flags())


if __name__ == '__main__':
    guard.run(main)
