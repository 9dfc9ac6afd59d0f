r"""Exports a classifier for serving and mobile, each format checked against the model.

  python export_inference_graph.py --model_name=cifarnet --dataset_name=shapes \
      --dataset_dir=/tmp/shapes --checkpoint_path=/tmp/train --export_dir=/tmp/export \
      --export_format=saved_model,frozen_graph,tflite,tflite_int8 --include_preprocessing

Formats: saved_model (signatures 'serving_default' on preprocessed float images and,
with --include_preprocessing, 'serving_bytes' on encoded images), graphdef (slim's
inference graph, no weights), frozen_graph (weights folded in; placeholder 'input'),
tflite and tflite_int8. After each is written it is reloaded and run on
--num_parity_examples images next to the model; one out of tolerance fails the export
and is removed. TF-Slim's --output_file alone writes the frozen graph there.
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from absl import app, flags  # noqa: E402

from cli import guard, jobs  # noqa: E402
from cli import flags as cli_flags  # noqa: E402
from export import pipeline  # noqa: E402

FLAGS = flags.FLAGS
cli_flags.define_model_flags()
cli_flags.define_checkpoint_flag('Checkpoint prefix or directory with the weights '
                                 'to export; default: freshly initialised weights.')
cli_flags.define_dataset_name_flag(
    'imagenet', 'The dataset the model was trained on (gives the number of classes, '
    'image channels and class names)')
cli_flags.define_moving_average_flag('when set, export the averaged weights '
                                     '(any value: the checkpoint holds them)')
cli_flags.define_tf_log_level_flag()
flags.adopt_module_key_flags(cli_flags)
# TF-Slim's flags.
flags.DEFINE_bool('is_training', False, 'Write the training-mode graph (dropout and '
                  'batch norm on batch statistics); --export_format=graphdef only.')
flags.DEFINE_integer('image_size', None, 'Input height and width; default: the '
                     'network\'s default image size.')
flags.DEFINE_integer('batch_size', None, 'Batch size of the GraphDef\'s and the TFLite '
                     'model\'s input; default: any for graphs, 1 for TFLite. The '
                     'SavedModel takes any batch.')
flags.DEFINE_string('dataset_dir', None, 'The converted dataset: parity-check and int8 '
                    'calibration images and labels.txt. Default: seeded synthetic '
                    'images and the dataset\'s built-in class names.')
flags.DEFINE_string('output_file', None, 'Where to write the one graph or TFLite file '
                    'asked for; alone, the frozen GraphDef (input placeholder "input").')
flags.DEFINE_bool('quantize', False, 'Export the quantized model of a quantization-'
                  'aware checkpoint (--quantize_delay in training), its int8 TFLite on '
                  'the learned ranges; such a checkpoint is detected without it, with it '
                  'a float checkpoint is an error.')
flags.DEFINE_bool('is_video_model', False, 'The network takes clips [batch, frames, '
                  'height, width, channels] (i3d, s3dg).')
flags.DEFINE_integer('num_frames', None, 'Frames per clip of a video model; default: '
                     'the network\'s.')
flags.DEFINE_bool('write_text_graphdef', False, 'Write GraphDefs as text (.pbtxt).')
# Formats and places.
flags.DEFINE_list('export_format', None, 'One or several of: '
                  + ', '.join(pipeline.FORMATS) + '. Default: saved_model with '
                  '--saved_model_dir or --export_dir, frozen_graph with --output_file.')
flags.DEFINE_string('export_dir', None, 'Directory for the formats, under fixed names: '
                    'saved_model/, inference_graph.pb, frozen_graph.pb, '
                    'model_float.tflite, model_int8.tflite, plus labels.txt.')
flags.DEFINE_string('saved_model_dir', None, 'Where to write the SavedModel (instead of '
                    '<export_dir>/saved_model).')
flags.DEFINE_bool('overwrite', False, 'Replace existing exports.')
flags.DEFINE_bool('include_preprocessing', False, 'Add the SavedModel signature '
                  '"serving_bytes": encoded JPEG/PNG strings through the network\'s '
                  'evaluation preprocessing.')
flags.DEFINE_string('preprocessing_name', None, 'The preprocessing family; default: '
                    '--model_name\'s.')
flags.DEFINE_enum('tflite_io_dtype', 'uint8', ['uint8', 'float32'], 'Input and output '
                  'type of the int8 TFLite model.')
# The parity check.
flags.DEFINE_float('parity_tolerance', 1e-4, 'Largest logit difference of float formats, '
                   'relative to the largest logit.')
flags.DEFINE_float('min_int8_agreement', 0.95, 'Smallest top-1 agreement of the int8 '
                   'model with the float model.')
flags.DEFINE_integer('num_parity_examples', 64, 'Images run through each export and '
                     'the model.')
flags.DEFINE_string('parity_split_name', 'validation', 'Split of --dataset_dir the '
                    'parity images come from.')
flags.DEFINE_integer('num_calibration_examples', 100, 'Images calibrating the int8 '
                     'model\'s ranges.')
flags.DEFINE_string('calibration_split_name', 'train', 'Split of --dataset_dir the '
                    'calibration images come from.')


def _formats():
    if FLAGS.export_format:
        return pipeline.parse_formats(','.join(FLAGS.export_format))
    return tuple(name for name, given in [
        ('saved_model', FLAGS.saved_model_dir or (FLAGS.export_dir and not FLAGS.output_file)),
        ('frozen_graph', FLAGS.output_file)] if given)


def main(argv):
    del argv
    targets = pipeline.resolve_targets(
        _formats(), export_dir=FLAGS.export_dir, saved_model_dir=FLAGS.saved_model_dir,
        output_file=FLAGS.output_file, write_text_graphdef=FLAGS.write_text_graphdef)
    request = pipeline.ExportRequest(
        targets=targets, batch_size=FLAGS.batch_size,
        write_text_graphdef=FLAGS.write_text_graphdef, training_graph=FLAGS.is_training,
        tflite_io_dtype=FLAGS.tflite_io_dtype, float_tolerance=FLAGS.parity_tolerance,
        min_int8_agreement=FLAGS.min_int8_agreement, overwrite=FLAGS.overwrite,
        labels_dir=FLAGS.export_dir)
    return jobs.export(jobs.ExportConfig(
        model_name=FLAGS.model_name, dataset_name=FLAGS.dataset_name,
        checkpoint_path=FLAGS.checkpoint_path, dataset_dir=FLAGS.dataset_dir,
        image_size=FLAGS.image_size, is_video_model=FLAGS.is_video_model,
        num_frames=FLAGS.num_frames, labels_offset=FLAGS.labels_offset,
        use_grayscale=FLAGS.use_grayscale,
        use_moving_averages=FLAGS.moving_average_decay is not None,
        preprocessing_name=FLAGS.preprocessing_name,
        include_preprocessing=FLAGS.include_preprocessing,
        parity_split_name=FLAGS.parity_split_name,
        num_parity_examples=FLAGS.num_parity_examples,
        calibration_split_name=FLAGS.calibration_split_name,
        num_calibration_examples=FLAGS.num_calibration_examples,
        quantize=FLAGS.quantize), request)


if __name__ == '__main__':
    app.run(guard.guarded(main))
