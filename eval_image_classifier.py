r"""Evaluates a trained classifier over a split: prints eval/Accuracy, eval/Recall_5.

  python eval_image_classifier.py --dataset_name=shapes --dataset_dir=/tmp/shapes \
      --dataset_split_name=validation --model_name=cifarnet \
      --checkpoint_path=/tmp/train --eval_dir=/tmp/eval

With --eval_interval_secs=N it follows the training in --checkpoint_path, evaluating
each new checkpoint once until the training's last one. --eval_dir receives
metrics.json(l), confusion.csv, best_checkpoint.json and TensorBoard events.
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from absl import app, flags  # noqa: E402

from cli import configs, guard, jobs  # noqa: E402
from cli import flags as cli_flags  # noqa: E402

FLAGS = flags.FLAGS
cli_flags.define_model_flags()
cli_flags.define_dataset_flags(default_split='test')
cli_flags.define_checkpoint_flag('A checkpoint prefix, or a directory whose latest '
                                 'checkpoint is evaluated.')
cli_flags.define_moving_average_flag('when set, evaluate the averaged weights '
                                     '(any value: the checkpoint holds them); unset: '
                                     'the raw weights')
cli_flags.define_continuous_eval_flags()
cli_flags.define_clone_flags()
cli_flags.define_tf_log_level_flag()
flags.adopt_module_key_flags(cli_flags)
flags.DEFINE_string('eval_dir', '/tmp/tfmodel/', 'Where metrics.json, metrics.jsonl and '
                    'the event file are written.')
flags.DEFINE_integer('eval_image_size', None, 'Eval image size; default: the '
                     'network\'s default image size.')
flags.DEFINE_integer('max_num_batches', None, 'Evaluate only this many batches; '
                     'default: the whole split, once.')
flags.DEFINE_bool('quantize', False, 'Evaluate the quantized model (fake int8 '
                  'quantization on the learned ranges). A quantization-aware checkpoint '
                  '(--quantize_delay in training) is detected without it; with it, a '
                  'float checkpoint is an error.')

DEFAULT_BATCH_SIZE = 100


def main(argv):
    del argv
    data = configs.data_config_from_flags(default_batch_size=DEFAULT_BATCH_SIZE,
                                          image_size=FLAGS.eval_image_size)
    jobs.evaluate(data, FLAGS.checkpoint_path, FLAGS.eval_dir, FLAGS.max_num_batches,
                  use_moving_averages=FLAGS.moving_average_decay is not None,
                  top_k=configs.top_k_from_flags(), watch=configs.watch_config_from_flags(),
                  deployment=configs.clone_deployment_from_flags(), quantize=FLAGS.quantize)


if __name__ == '__main__':
    app.run(guard.guarded(main))
