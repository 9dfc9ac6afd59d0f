"""Trains lenet for a few steps through the coordinator runner, against an in-process
ParameterServerStrategy cluster (1 ps, 1 worker) on 127.0.0.1; prints a JSON summary.
Arguments: train_dir [optimizer (momentum) [max_number_of_steps (6)]]; a train_dir with
a checkpoint resumes from it.

Run by test_runners.py in its own process: connecting to a cluster changes the whole
process's TensorFlow context.
"""
import json
import os
import socket
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from core import seeding  # noqa: E402
from nets import nets_factory  # noqa: E402
from training.recipes import learning_rate
from training.recipes import optimizers
from training.loop import trainer as trainer_lib


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def main(train_dir, optimizer_name='momentum', max_steps=6):
    seeding.seed_everything(0)
    cluster = tf.train.ClusterSpec({'worker': [f'127.0.0.1:{_free_port()}'],
                                    'ps': [f'127.0.0.1:{_free_port()}']})
    # In-process servers deadlock with fewer inter-op threads than workers + 1.
    worker_config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=2)
    servers = [tf.distribute.Server(cluster, job_name='worker', task_index=0,
                                    config=worker_config, protocol='grpc'),
               tf.distribute.Server(cluster, job_name='ps', task_index=0, protocol='grpc')]
    strategy = tf.distribute.experimental.ParameterServerStrategy(
        tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer='grpc'))

    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (8, 28, 28, 1)).astype(np.float32)
    labels = rng.integers(0, 10, 8)

    def input_fn(context=None):
        del context
        return tf.data.Dataset.from_tensor_slices((images, labels)).batch(8).repeat()

    with strategy.scope():
        network = nets_factory.get_network_fn('lenet', 10, is_training=True,
                                              dropout_keep_prob=1.0)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig(optimizer_name))
    trainer = trainer_lib.Trainer(
        strategy=strategy, network=network, optimizer=optimizer,
        learning_rate_fn=learning_rate.create_learning_rate_fn(
            learning_rate.LearningRateConfig('fixed', learning_rate=0.01), 100, 8),
        input_fn=input_fn, image_shape=(28, 28, 1),
        config=trainer_lib.TrainConfig(train_dir=train_dir, batch_size=8,
                                      max_number_of_steps=max_steps, log_every_n_steps=3))
    before = network.trainable_variables[0].numpy()
    metrics = trainer.train()
    print(json.dumps({
        'runner': type(trainer.steps.runner).__name__,
        'global_step': int(trainer.global_step.numpy()),
        'variable_devices': sorted({v.device for v in network.trainable_variables}),
        'optimizer_devices': sorted({v.device for v in optimizer.variables}),
        'changed': bool(np.abs(network.trainable_variables[0].numpy() - before).max() > 0),
        'loss': metrics['total_loss'],
        'checkpoint': tf.train.latest_checkpoint(train_dir),
    }))
    sys.stdout.flush()
    del servers
    os._exit(0)  # in-process servers cannot be shut down cleanly


if __name__ == '__main__':
    main(sys.argv[1], *sys.argv[2:3], *[int(steps) for steps in sys.argv[3:4]])
