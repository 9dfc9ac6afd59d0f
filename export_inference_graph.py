r"""Exports a classifier for inference: a SavedModel and/or slim's frozen GraphDef.

  python export_inference_graph.py --model_name=cifarnet --dataset_name=shapes \
      --checkpoint_path=/tmp/train --saved_model_dir=/tmp/export \
      --output_file=/tmp/cifarnet.pb
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from absl import app, flags  # noqa: E402

from cli import guard, jobs  # noqa: E402
from cli import flags as cli_flags  # noqa: E402

FLAGS = flags.FLAGS
cli_flags.define_model_flags()
cli_flags.define_checkpoint_flag('Checkpoint prefix or directory with the weights '
                                 'to export; default: freshly initialised weights.')
cli_flags.define_dataset_name_flag(
    'imagenet', 'The dataset the model was trained on (gives the number of classes and '
    'image channels)')
cli_flags.define_moving_average_flag('when set, export the averaged weights '
                                     '(any value: the checkpoint holds them)')
cli_flags.define_tf_log_level_flag()
flags.adopt_module_key_flags(cli_flags)
flags.DEFINE_integer('image_size', None, 'Input height and width; default: the '
                     'network\'s default image size.')
flags.DEFINE_integer('batch_size', None, 'Batch size of the GraphDef\'s input; '
                     'default: any.')
flags.DEFINE_string('saved_model_dir', None, 'Where to write the SavedModel.')
flags.DEFINE_string('output_file', None, 'Where to write the frozen GraphDef (.pb) '
                    'whose input placeholder is named "input".')


def main(argv):
    del argv
    jobs.export(jobs.ExportConfig(
        model_name=FLAGS.model_name, dataset_name=FLAGS.dataset_name,
        checkpoint_path=FLAGS.checkpoint_path, saved_model_dir=FLAGS.saved_model_dir,
        output_file=FLAGS.output_file, image_size=FLAGS.image_size,
        batch_size=FLAGS.batch_size, labels_offset=FLAGS.labels_offset,
        use_grayscale=FLAGS.use_grayscale,
        use_moving_averages=FLAGS.moving_average_decay is not None))


if __name__ == '__main__':
    app.run(guard.guarded(main))
