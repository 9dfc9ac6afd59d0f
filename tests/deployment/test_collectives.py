"""--all_reduce_alg and --num_packs: mapped to the strategy's collectives, refused where
they cannot work. No GPU here: the GPU mappings are checked as objects, the CPU ones
by running an all-reduce."""
import pytest
import tensorflow as tf

from core.errors import UsageError
from deployment import cluster, collectives, model_deploy
from deployment.collectives import AllReduceConfig

IMPLEMENTATION = tf.distribute.experimental.CommunicationImplementation


@pytest.mark.parametrize('algorithm, num_packs, kind', [
    ('nccl', 2, tf.distribute.NcclAllReduce),
    ('hierarchical_copy', 0, tf.distribute.HierarchicalCopyAllReduce)])
def test_gpu_clones_get_the_cross_device_ops_named(algorithm, num_packs, kind):
    ops = collectives.cross_device_ops(AllReduceConfig(algorithm, num_packs),
                                       clone_on_cpu=False, num_gpus=2)
    assert type(ops) is kind  # pylint: disable=unidiomatic-typecheck
    assert ops._num_packs == num_packs  # pylint: disable=protected-access


def test_unset_leaves_gpu_clones_to_tensorflow_and_cpu_clones_on_one_device():
    assert collectives.cross_device_ops(AllReduceConfig(), clone_on_cpu=False,
                                        num_gpus=2) is None
    assert isinstance(collectives.cross_device_ops(AllReduceConfig(), clone_on_cpu=True,
                                                   num_gpus=0),
                      tf.distribute.ReductionToOneDevice)


@pytest.mark.parametrize('algorithm, implementation', [
    ('', IMPLEMENTATION.AUTO), ('ring', IMPLEMENTATION.RING), ('nccl', IMPLEMENTATION.NCCL)])
def test_workers_get_the_communication_implementation_named(algorithm, implementation):
    options = collectives.communication_options(AllReduceConfig(algorithm), num_gpus=1)
    assert options.implementation == implementation


def test_workers_get_the_pack_size_asked_for():
    options = collectives.communication_options(
        AllReduceConfig('ring', bytes_per_pack=1 << 20), num_gpus=0)
    assert (options.implementation, options.bytes_per_pack) == (IMPLEMENTATION.RING, 1 << 20)
    assert collectives.communication_options(AllReduceConfig(), num_gpus=0).bytes_per_pack == 0


def test_cpu_clones_keep_the_one_device_reduction():
    strategy = model_deploy.create_strategy(
        model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True))
    assert isinstance(strategy.extended._cross_device_ops,  # pylint: disable=protected-access
                      tf.distribute.ReductionToOneDevice)


def test_a_local_multi_worker_strategy_all_reduces_over_ring():
    tf.constant(0)  # TensorFlow started, as in a script by now (collectives configured)
    strategy = model_deploy.create_strategy(model_deploy.DeploymentConfig(
        strategy='multi_worker', all_reduce=AllReduceConfig('ring')))
    assert isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    options = strategy.extended._communication_options  # pylint: disable=protected-access
    assert options.implementation == IMPLEMENTATION.RING

    with strategy.scope():
        weight = tf.Variable(3.0)

    @tf.function
    def step():  # a collective all-reduce under RING, in a group of one replica
        return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, 2.0 * weight))

    assert float(step()) == 6.0


def _cluster(ps=0, workers=2):
    return cluster.Cluster(ps=tuple(f'localhost:{100 + i}' for i in range(ps)),
                           workers=tuple(f'localhost:{200 + i}' for i in range(workers)),
                           task_type='worker', task_index=0, source='a test')


@pytest.mark.parametrize('flags, message', [
    (dict(all_reduce=AllReduceConfig('nccl')), 'one device has nothing to all-reduce'),
    (dict(all_reduce=AllReduceConfig('ring'), num_clones=2, clone_on_cpu=True),
     '--all_reduce_alg=ring does not apply to mirrored training; clones on one host use '
     'nccl or hierarchical_copy'),
    (dict(all_reduce=AllReduceConfig('nccl'), num_clones=2, clone_on_cpu=True),
     '--all_reduce_alg=nccl runs on GPUs, not with --clone_on_cpu'),
    (dict(all_reduce=AllReduceConfig('hierarchical_copy'), cluster=_cluster()),
     'does not apply to multi_worker training; workers use ring or nccl'),
    (dict(all_reduce=AllReduceConfig('ring'), cluster=_cluster(ps=1)),
     'parameter servers aggregate the updates themselves'),
    (dict(all_reduce=AllReduceConfig('nccl', num_packs=2), cluster=_cluster()),
     '--num_packs=2 applies to clones with --all_reduce_alg=nccl or hierarchical_copy'),
    (dict(all_reduce=AllReduceConfig(num_packs=4), num_clones=2),
     '--num_packs=4 applies to clones'),
    (dict(all_reduce=AllReduceConfig(bytes_per_pack=1024), num_clones=2, clone_on_cpu=True),
     '--all_reduce_bytes_per_pack=1024 applies to workers without ps tasks'),
    (dict(all_reduce=AllReduceConfig(bytes_per_pack=1024), cluster=_cluster(ps=1)),
     '--all_reduce_bytes_per_pack=1024 applies to workers without ps tasks'),
])
def test_combinations_that_cannot_work_are_refused_up_front(flags, message):
    with pytest.raises(UsageError, match=message):
        model_deploy.from_flags(**flags)


@pytest.mark.parametrize('config, message', [
    (dict(algorithm='allreduce'), 'Unknown --all_reduce_alg=allreduce; use ring or nccl '
                                  'for workers'),
    (dict(num_packs=-1), '--num_packs must be at least 0'),
    (dict(bytes_per_pack=-1), '--all_reduce_bytes_per_pack must be at least 0'),
])
def test_bad_values_are_refused(config, message):
    with pytest.raises(UsageError, match=message):
        AllReduceConfig(**config)


def test_gpu_algorithms_without_a_visible_gpu_are_refused_when_the_strategy_is_made():
    assert not tf.config.list_physical_devices('GPU')
    with pytest.raises(UsageError, match='--all_reduce_alg=nccl needs GPUs and none is '
                                         'visible'):
        model_deploy.create_strategy(model_deploy.DeploymentConfig(
            strategy='multi_worker', all_reduce=AllReduceConfig('nccl')))
    with pytest.raises(UsageError, match='--num_clones=2 needs 2 GPUs but 0 are visible'):
        model_deploy.create_strategy(model_deploy.DeploymentConfig(
            num_clones=2, all_reduce=AllReduceConfig('hierarchical_copy', num_packs=2)))
