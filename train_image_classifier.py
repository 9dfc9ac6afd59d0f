r"""Trains an image classifier on a converted dataset, saving checkpoints to --train_dir.

  python train_image_classifier.py --dataset_name=shapes --dataset_dir=/tmp/shapes \
      --model_name=cifarnet --train_dir=/tmp/train --max_number_of_steps=1000

Checkpoints, TensorBoard events, flags.txt (a --flagfile repeating the run) and
run_info.json go to --train_dir; a run finding checkpoints there resumes from them.
"""
from cli import startup  # noqa: F401  (first: configures TensorFlow before it loads)

from cli import benchmark_job, configs, data_service_job, guard, train_job  # noqa: E402
from cli import flags as cli_flags  # noqa: E402

FLAG_GROUPS = ('Model', 'Dataset', 'Split', 'Input pipeline', 'Training', 'Augmentation',
               'Batch recipes', 'Stochastic depth', 'Distillation', 'Optimizer',
               'Modern optimizers', 'Learning rate', 'Weights', 'Fine-tuning',
               'Checkpoints and progress',
               'Devices', 'Device performance', 'Cluster', 'tf.data service', 'Logging',
               'Benchmark')
cli_flags.define(FLAG_GROUPS, usage=__doc__)


def main(argv):
    del argv
    if data_service_job.serves_data():  # a tf.data service task, not a trainer
        return data_service_job.serve()
    job, benchmark = configs.training_from_flags(), configs.benchmark_from_flags()
    return benchmark_job.time_training(job, benchmark) if benchmark else train_job.run(job)


if __name__ == '__main__':
    guard.run(main)
