r"""Trains an image classifier: flags -> configs -> cli.jobs.train.

  python train_image_classifier.py --dataset_name=shapes --dataset_dir=/tmp/shapes \
      --model_name=cifarnet --train_dir=/tmp/train --max_number_of_steps=1000
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

import sys  # noqa: E402

from absl import app, flags  # noqa: E402

from cli import configs, guard, jobs, run_record  # noqa: E402
from cli import flags as cli_flags  # noqa: E402
from training import train_loop  # noqa: E402

FLAGS = flags.FLAGS
cli_flags.define_model_flags()
cli_flags.define_dataset_flags(default_split='train')
cli_flags.define_deployment_flags()
cli_flags.define_training_flags()
cli_flags.define_moving_average_flag('kept in the checkpoints for evaluation')
cli_flags.define_tf_log_level_flag()
flags.adopt_module_key_flags(cli_flags)

DEFAULT_BATCH_SIZE = 32


def main(argv):
    del argv
    data = configs.data_config_from_flags(
        default_batch_size=DEFAULT_BATCH_SIZE, image_size=FLAGS.train_image_size,
        seed=FLAGS.seed)
    config = train_loop.TrainConfig(
        train_dir=FLAGS.train_dir, batch_size=data.batch_size,
        max_number_of_steps=FLAGS.max_number_of_steps,
        log_every_n_steps=FLAGS.log_every_n_steps, steps_per_loop=FLAGS.steps_per_loop,
        trace_every_n_steps=FLAGS.trace_every_n_steps,
        precision=FLAGS.precision, jit_compile=FLAGS.jit_compile,
        checkpoint_input_position=FLAGS.checkpoint_input_position,
        save_interval_secs=FLAGS.save_interval_secs,
        save_summaries_secs=FLAGS.save_summaries_secs,
        max_checkpoints_to_keep=FLAGS.max_checkpoints_to_keep,
        label_smoothing=FLAGS.label_smoothing, checkpoint_path=FLAGS.checkpoint_path,
        checkpoint_exclude_scopes=configs.split_scopes('checkpoint_exclude_scopes'),
        trainable_scopes=configs.split_scopes('trainable_scopes'),
        ignore_missing_vars=FLAGS.ignore_missing_vars,
        moving_average_decay=FLAGS.moving_average_decay)
    if FLAGS.dry_run_restore:
        return jobs.dry_run_restore(data, config)
    deployment = configs.deployment_config_from_flags()
    if deployment.is_chief and not deployment.serves_only:
        run_record.record(FLAGS.train_dir, FLAGS, sys.argv[0], FLAGS.max_number_of_steps)
    return jobs.train(data, deployment, config,
                      configs.optimizer_config_from_flags(),
                      configs.learning_rate_config_from_flags(), FLAGS.weight_decay,
                      quantize_delay=FLAGS.quantize_delay)


if __name__ == '__main__':
    app.run(guard.guarded(main))
