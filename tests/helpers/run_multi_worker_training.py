"""Trains lenet a few steps on fixed in-memory batches, as one worker of a
MultiWorkerMirroredStrategy cluster (TF_CONFIG) or, with --reference, as one process on
both workers' batches concatenated; saves the trainable weights to an .npz.

    run_multi_worker_training.py OUT.npz TRAIN_DIR [--reference]

Run by test_multi_worker.py, one process per worker: joining a cluster changes the
whole process's TensorFlow context.
"""
import json
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from cli import guard  # noqa: E402
from deployment import cluster, model_deploy  # noqa: E402
from deployment import plan as deployment_plan  # noqa: E402
from nets import nets_factory  # noqa: E402
from training.recipes import learning_rate
from training.recipes import optimizers
from training.loop import trainer as trainer_lib

NUM_WORKERS, BATCH, STEPS = 2, 4, 4


def worker_examples(worker):
    """STEPS * BATCH fixed examples for one worker."""
    rng = np.random.default_rng(100 + worker)
    return (rng.uniform(-1, 1, (STEPS * BATCH, 28, 28, 1)).astype(np.float32),
            rng.integers(0, 10, STEPS * BATCH).astype(np.int64))


def concatenated_examples():
    """Step s's batch is worker 0's s-th batch followed by worker 1's."""
    parts = [worker_examples(w) for w in range(NUM_WORKERS)]
    images = np.concatenate([p[0].reshape(STEPS, BATCH, 28, 28, 1) for p in parts], 1)
    labels = np.concatenate([p[1].reshape(STEPS, BATCH) for p in parts], 1)
    return images.reshape(-1, 28, 28, 1), labels.reshape(-1)


def set_initial_weights(network):
    for variable in network.variables:
        rng = np.random.default_rng(sum(map(ord, variable.name)))
        variable.assign(0.1 * rng.standard_normal(variable.shape).astype(np.float32))


def main(out_path, train_dir, reference):
    if reference:
        deployment = model_deploy.DeploymentConfig()
        examples, batch = concatenated_examples(), NUM_WORKERS * BATCH
    else:
        deployment = model_deploy.from_flags(cluster=cluster.resolve())
        examples, batch = None, BATCH
    plan = deployment_plan.create(deployment)
    strategy = plan.strategy

    def input_fn(context=None):
        data = examples or worker_examples(context.input_pipeline_id)
        return tf.data.Dataset.from_tensor_slices(data).batch(batch).repeat()

    with strategy.scope():
        network = nets_factory.get_network_fn('lenet', 10, is_training=True,
                                              dropout_keep_prob=1.0)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig('momentum'))
    trainer = trainer_lib.Trainer(
        plan=plan, network=network, optimizer=optimizer,
        learning_rate_fn=learning_rate.create_learning_rate_fn(
            learning_rate.LearningRateConfig('fixed', learning_rate=0.1), 100, batch),
        input_fn=input_fn, image_shape=(28, 28, 1),
        config=trainer_lib.TrainConfig(train_dir=train_dir, batch_size=batch,
                                      max_number_of_steps=STEPS, save_summaries_secs=0))
    with strategy.scope():
        set_initial_weights(network)
    np.savez(out_path + '.initial.npz',
             **{v.name: v.numpy() for v in network.trainable_variables})
    metrics = trainer.train()
    np.savez(out_path, **{v.name: v.numpy() for v in network.trainable_variables})
    print(json.dumps({'global_step': int(trainer.global_step.numpy()),
                      'replicas': strategy.num_replicas_in_sync,
                      'loss': metrics['total_loss']}))
    guard.exit_now(0, keep_alive=trainer)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2], '--reference' in sys.argv[3:])
