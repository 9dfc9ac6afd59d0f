"""Trains an image classifier: flags -> configs -> deployment.jobs.train.

  python train_image_classifier.py --dataset_name=shapes --dataset_dir=/tmp/shapes \
      --model_name=cifarnet --train_dir=/tmp/train --max_number_of_steps=1000
"""
from absl import app, flags

from deployment import common_flags, jobs, train_loop

FLAGS = flags.FLAGS
common_flags.define_model_flags()
common_flags.define_dataset_flags(default_split='train')
common_flags.define_deployment_flags()
common_flags.define_training_flags()
common_flags.define_moving_average_flag('kept in the checkpoints for evaluation')

DEFAULT_BATCH_SIZE = 32


def main(argv):
    del argv
    data = common_flags.data_config_from_flags(
        default_batch_size=DEFAULT_BATCH_SIZE, image_size=FLAGS.train_image_size,
        seed=FLAGS.seed)
    config = train_loop.TrainConfig(
        train_dir=FLAGS.train_dir, batch_size=data.batch_size,
        max_number_of_steps=FLAGS.max_number_of_steps,
        log_every_n_steps=FLAGS.log_every_n_steps,
        save_interval_secs=FLAGS.save_interval_secs,
        save_summaries_secs=FLAGS.save_summaries_secs,
        max_checkpoints_to_keep=FLAGS.max_checkpoints_to_keep,
        label_smoothing=FLAGS.label_smoothing, checkpoint_path=FLAGS.checkpoint_path,
        checkpoint_exclude_scopes=common_flags.split_scopes(FLAGS.checkpoint_exclude_scopes),
        trainable_scopes=common_flags.split_scopes(FLAGS.trainable_scopes),
        ignore_missing_vars=FLAGS.ignore_missing_vars,
        moving_average_decay=FLAGS.moving_average_decay)
    return jobs.train(data, common_flags.deployment_config_from_flags(), config,
                      common_flags.optimizer_config_from_flags(),
                      common_flags.learning_rate_config_from_flags(), FLAGS.weight_decay)


if __name__ == '__main__':
    app.run(common_flags.guarded(main))
