"""Trains lenet on fixed batches with sync replicas over parameter servers, as the chief
of a cluster from TF_CONFIG (its ps tasks and other workers run
train_image_classifier.py and serve), or with --reference as one process on the
workers' batches concatenated; saves the trainable weights and prints a JSON summary.

    run_sync_replicas_training.py OUT.npz TRAIN_DIR (--reference | --aggregate=N)
        [--steps=S] [--log_every=L] [--warmup_steps=W]
        [--slow_worker_secs=T [--slow_worker=W]]
        [--fault=offer|wait --fault_worker=W --fault_marker=PATH]

Worker w (its task index, also once restarted) always reads batch w, so an update that
averages one gradient per worker equals one step on the concatenation.

--fault (a test-only fault point, deployment.sync_replicas.SyncReplicas.fault_point):
the first time worker W's gradient is taken, it writes PATH and blocks, either inside
its offer after half of its gradient is written into the slots (offer) or before
waiting for its release (wait), until the test kills it.
"""
import argparse
import dataclasses
import json
import os
import re
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
# tf.data's sleep has no public name.
from tensorflow.python.data.experimental.ops import testing as data_testing  # noqa: E402
from absl import logging  # noqa: E402

from cli import guard  # noqa: E402
from deployment import cluster, model_deploy, sync_replicas  # noqa: E402
from deployment import plan as deployment_plan  # noqa: E402
from nets import nets_factory  # noqa: E402
from training.recipes import learning_rate
from training.recipes import optimizers
from training.loop import trainer as trainer_lib

BATCH = 4


def worker_batches(num_workers):
    rng = np.random.default_rng(7)
    return (rng.uniform(-1, 1, (num_workers, BATCH, 28, 28, 1)).astype(np.float32),
            rng.integers(0, 10, (num_workers, BATCH)).astype(np.int64))


def whole_variables(variables):
    """{name: pieces in order}: a variable split over several ps tasks is listed as its
    pieces ('<name>/part_<i>:0', split along the first axis); one piece otherwise."""
    whole = {}
    for variable in variables:
        piece = re.fullmatch(r'(.*)/part_(\d+):0', variable.name)
        name, index = (piece.group(1) + ':0', int(piece.group(2))) if piece else (
            variable.name, 0)
        whole.setdefault(name, []).append((index, variable))
    return {name: [v for _, v in sorted(pieces, key=lambda p: p[0])]
            for name, pieces in whole.items()}


def set_initial_weights(network):
    """The same weights whether a variable is split over ps tasks or not."""
    for name, pieces in whole_variables(network.variables).items():
        shape = [sum(p.shape[0] for p in pieces), *pieces[0].shape[1:]]
        rng = np.random.default_rng(sum(map(ord, name)))
        value = 0.05 * rng.standard_normal(shape).astype(np.float32)
        for piece, part in zip(pieces, np.split(value, np.cumsum(
                [p.shape[0] for p in pieces])[:-1])):
            piece.assign(part)


def save_weights(path, network):
    np.savez(path, **{name: np.concatenate([p.numpy() for p in pieces])
                      for name, pieces in whole_variables(
                          network.trainable_variables).items()})


def die_once(stage, victim, marker):
    """A fault point: `victim`, the first time it reaches `stage` with its gradient
    taken, writes `marker` and blocks until killed. Its ops are unplaced, so they run on
    the worker calling (as measured with tf.print)."""
    blocking_fifo = marker + '.fifo'
    os.mkfifo(blocking_fifo)

    def marker_tag(version):
        return tf.strings.as_string(version)

    def fault_point(at, worker, version, taken):
        if at != stage:
            return tf.constant(0)

        def write_and_block():
            written = tf.io.write_file(marker, marker_tag(version))
            with tf.control_dependencies([written]):
                # Opening a FIFO no one writes blocks: only the test's kill ends it. Its
                # name depends on a value of the step, so that Grappler cannot fold (and
                # run) the read while optimising the function.
                path = tf.strings.join([blocking_fifo,
                                        tf.strings.substr(marker_tag(version), 0, 0)])
                return tf.strings.length(tf.io.read_file(path))

        first_time = tf.equal(tf.size(tf.io.matching_files(marker)), 0)
        return tf.cond(taken & tf.equal(worker, victim) & first_time, write_and_block,
                       lambda: tf.constant(0))

    return fault_point


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
    if args.fault:
        sync_replicas.SyncReplicas.fault_point = staticmethod(
            die_once(args.fault, args.fault_worker, args.fault_marker))

    def input_fn(context=None):
        del context
        if args.reference:  # one batch: every worker's, concatenated
            data = (images.reshape(-1, 28, 28, 1), labels.reshape(-1))
            return tf.data.Dataset.from_tensors(data).repeat()
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        dataset = tf.data.Dataset.from_tensors(
            (tf.gather(images, worker), tf.gather(labels, worker))).repeat()
        if not args.slow_worker_secs:
            return dataset
        # The slow worker (by default the last) gets every batch this late (a straggler).
        slow_worker = num_workers - 1 if args.slow_worker is None else args.slow_worker
        delay = tf.where(tf.equal(worker, slow_worker),
                         tf.constant(int(args.slow_worker_secs * 1e6), tf.int64),
                         tf.constant(0, tf.int64))
        return dataset.apply(data_testing.sleep(delay))

    batch = BATCH * (num_workers if args.reference else 1)
    with strategy.scope():
        network = nets_factory.get_network_fn('lenet', 10, is_training=True,
                                              dropout_keep_prob=1.0)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig('momentum'))
    config = trainer_lib.TrainConfig(train_dir=args.train_dir, batch_size=batch,
                                    max_number_of_steps=args.warmup_steps or args.steps,
                                    log_every_n_steps=args.log_every,
                                    save_summaries_secs=0)
    trainer = trainer_lib.Trainer(
        plan=deployment_plan.for_strategy(
            strategy, replicas_to_aggregate=None if args.reference else args.aggregate),
        network=network, optimizer=optimizer,
        learning_rate_fn=learning_rate.create_learning_rate_fn(
            learning_rate.LearningRateConfig('fixed', learning_rate=0.01), 100, batch),
        input_fn=input_fn, image_shape=(28, 28, 1), config=config)
    with strategy.scope():
        set_initial_weights(network)
    save_weights(args.out + '.initial.npz', network)
    if args.warmup_steps:  # tracing and input start-up, outside the timed part
        trainer.train()
        trainer.config = dataclasses.replace(config, max_number_of_steps=args.steps)
    started = time.monotonic()
    trainer.train()
    elapsed = time.monotonic() - started
    save_weights(args.out, network)
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
    parser.add_argument('--slow_worker', type=int, default=None)
    parser.add_argument('--fault', choices=('offer', 'wait'), default=None)
    parser.add_argument('--fault_worker', type=int, default=1)
    parser.add_argument('--fault_marker', default=None)
    main(parser.parse_args())
