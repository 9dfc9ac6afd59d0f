"""Trains lenet on fixed batches with sync replicas over parameter servers, as the chief
of a cluster from TF_CONFIG (its ps tasks and other workers run
train_image_classifier.py and serve), or with --reference as one process on the
workers' batches concatenated; saves the trainable weights and prints a JSON summary.

    run_sync_replicas_training.py OUT.npz TRAIN_DIR (--reference | --aggregate=N)
        [--steps=S] [--log_every=L] [--warmup_steps=W]

Worker w (in the order the workers build their input) always reads batch w, so an
update that averages one gradient per worker equals one step on the concatenation.
"""
import argparse
import dataclasses
import json
import os
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
# tf.data's sleep has no public name.
from tensorflow.python.data.experimental.ops import testing as data_testing  # noqa: E402
from absl import logging  # noqa: E402

from cli import guard  # noqa: E402
from deployment import cluster, model_deploy  # noqa: E402
from deployment import plan as deployment_plan  # noqa: E402
from nets import nets_factory  # noqa: E402
from training import learning_rate, optimizers, train_loop  # noqa: E402

BATCH = 4


def worker_batches(num_workers):
    rng = np.random.default_rng(7)
    return (rng.uniform(-1, 1, (num_workers, BATCH, 28, 28, 1)).astype(np.float32),
            rng.integers(0, 10, (num_workers, BATCH)).astype(np.int64))


def set_initial_weights(network):
    for variable in network.variables:
        rng = np.random.default_rng(sum(map(ord, variable.name)))
        variable.assign(0.05 * rng.standard_normal(variable.shape).astype(np.float32))


def main(args):
    logging.set_verbosity(logging.INFO)
    if args.reference:
        deployment = model_deploy.DeploymentConfig()
        num_workers = args.workers
    else:
        found = cluster.resolve()
        num_workers = len(found.workers)
        deployment = model_deploy.from_flags(cluster=found, sync_replicas=True,
                                             replicas_to_aggregate=args.aggregate)
    strategy = model_deploy.create_strategy(deployment)
    images, labels = worker_batches(num_workers)
    with strategy.scope():
        built = tf.Variable(0, dtype=tf.int64, trainable=False)

    def input_fn(context=None):
        del context
        if args.reference:  # one batch: every worker's, concatenated
            data = (images.reshape(-1, 28, 28, 1), labels.reshape(-1))
            return tf.data.Dataset.from_tensors(data).repeat()
        worker = (built.assign_add(1) - 1) % num_workers
        dataset = tf.data.Dataset.from_tensors(
            (tf.gather(images, worker), tf.gather(labels, worker))).repeat()
        if not args.slow_worker_secs:
            return dataset
        # The last worker to build its input gets every batch this late (a straggler).
        delay = tf.where(tf.equal(worker, num_workers - 1),
                         tf.constant(int(args.slow_worker_secs * 1e6), tf.int64),
                         tf.constant(0, tf.int64))
        return dataset.apply(data_testing.sleep(delay))

    batch = BATCH * (num_workers if args.reference else 1)
    with strategy.scope():
        network = nets_factory.get_network_fn('lenet', 10, is_training=True,
                                              dropout_keep_prob=1.0)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig('momentum'))
    config = train_loop.TrainConfig(train_dir=args.train_dir, batch_size=batch,
                                    max_number_of_steps=args.warmup_steps or args.steps,
                                    log_every_n_steps=args.log_every,
                                    save_summaries_secs=0)
    trainer = train_loop.Trainer(
        plan=deployment_plan.for_strategy(
            strategy, replicas_to_aggregate=None if args.reference else args.aggregate),
        network=network, optimizer=optimizer,
        learning_rate_fn=learning_rate.create_learning_rate_fn(
            learning_rate.LearningRateConfig('fixed', learning_rate=0.01), 100, batch),
        input_fn=input_fn, image_shape=(28, 28, 1), config=config)
    with strategy.scope():
        set_initial_weights(network)
    np.savez(args.out + '.initial.npz',
             **{v.name: v.numpy() for v in network.trainable_variables})
    if args.warmup_steps:  # tracing and input start-up, outside the timed part
        trainer.train()
        trainer.config = dataclasses.replace(config, max_number_of_steps=args.steps)
    started = time.monotonic()
    trainer.train()
    elapsed = time.monotonic() - started
    np.savez(args.out, **{v.name: v.numpy() for v in network.trainable_variables})
    sync = getattr(trainer.steps, 'sync_replicas', None)
    print(json.dumps({'global_step': int(trainer.global_step.numpy()),
                      'elapsed': elapsed,
                      'dropped': int(sync.dropped.numpy()) if sync else 0}), flush=True)
    guard.exit_now(0, keep_alive=trainer)


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('out')
    parser.add_argument('train_dir')
    parser.add_argument('--reference', action='store_true')
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--aggregate', type=int, default=2)
    parser.add_argument('--steps', type=int, default=4)
    parser.add_argument('--warmup_steps', type=int, default=0)
    parser.add_argument('--log_every', type=int, default=2)
    parser.add_argument('--slow_worker_secs', type=float, default=0.0)
    main(parser.parse_args())
