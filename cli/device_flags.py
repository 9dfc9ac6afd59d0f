"""The Device performance flag group of the training and evaluation scripts
(docs/performance.md, "GPU"), a definer as in cli.flags, which lists it in its GROUPS; and
the configs it gives: the all-reduce implementation and the input's prefetch (both part
of the DeploymentConfig) and the thread settings (applied by the job before any op).
Names and values of the all-reduce flags are the TF Model Garden's."""
from absl import flags

from core import threads
from deployment import collectives, device_input

# As in cli.flags: the flags belong to the script calling define().
flags.disclaim_key_flags()


def device_performance(define):
    """All-reduce, input prefetch to the devices, and threads: for GPU hosts mostly."""
    define.string('all_reduce_alg', '', 'How replicas all-reduce their gradients (the TF '
                  'Model Garden\'s flag). Clones on GPUs (--num_clones): nccl '
                  '(NcclAllReduce) or hierarchical_copy (HierarchicalCopyAllReduce); '
                  'workers without ps tasks (MultiWorkerMirroredStrategy): ring or nccl. '
                  'Unset: TensorFlow\'s choice (between workers AUTO; clones on CPU reduce '
                  'on one device).')
    define.integer('num_packs', 1, 'With --all_reduce_alg=nccl or hierarchical_copy on '
                   'clones: packs the gradients are batched into for the all-reduce (0: '
                   'no packing).')
    define.integer('all_reduce_bytes_per_pack', 0, 'Between workers without ps tasks: '
                   'the gradients are all-reduced in packs of about this many bytes, each '
                   'as soon as backprop has computed it, so that communication overlaps the '
                   'rest of the backward pass. 0: one pack after the whole backward pass '
                   '(TensorFlow\'s default).')
    define.bool('all_reduce_weight_factors', True, 'Between workers without ps tasks: a '
                'fully connected weight (or a conv covering its whole input) whose '
                'gradient\'s factors, the layer\'s inputs and output gradients of every '
                'replica, are at most half its size is all-reduced as those factors, and '
                'each worker multiplies them: the same sum in another order, for fewer '
                'bytes (cifarnet: 1.7 MB instead of 7.0 MB per step on 2 workers). '
                'Not with --precision=mixed_float16 or --gradient_accumulation_steps, '
                'nor in quantization-aware nets.')
    define.bool('prefetch_to_device', True, 'Prefetch input batches into each replica\'s '
                'device memory (TensorFlow\'s default); --noprefetch_to_device keeps them '
                'in host memory. Applies where the strategy distributes the input: '
                'multi-worker and parameter-server workers, evaluation with --num_clones; '
                'not one device, nor training clones on one host (their batches are copied '
                'inside the step).')
    define.integer('per_replica_buffer_size', 1, 'Batches prefetched per replica where '
                   '--prefetch_to_device applies (0: none).')
    define.integer('inter_op_threads', 0, 'Threads running independent ops at once; 0: '
                   'TensorFlow\'s choice (all the cores), or for all-reduce workers '
                   'sharing a host, their share of its cores. Set before TensorFlow '
                   'starts.')
    define.integer('intra_op_threads', 0, 'Threads one op (a convolution, a matmul) uses '
                   'on the CPU; 0: as --inter_op_threads.')
    define.enum('gpu_thread_mode', None, list(threads.GPU_THREAD_MODES), 'The threads '
                'launching GPU kernels (TF_GPU_THREAD_MODE): global shares TensorFlow\'s '
                'pool (its default), gpu_private gives each GPU a pool of its own, '
                'gpu_shared one pool for all GPUs. Unset: the environment\'s setting. No '
                'effect without a GPU.')
    define.integer('gpu_thread_count', None, 'Threads of each GPU pool with '
                   '--gpu_thread_mode=gpu_private or gpu_shared (TF_GPU_THREAD_COUNT; '
                   'TensorFlow\'s default: 2).')


def all_reduce_from_flags(flag_values: flags.FlagValues) -> collectives.AllReduceConfig:
    if 'all_reduce_alg' not in flag_values:  # a script without the group
        return collectives.AllReduceConfig()
    return collectives.AllReduceConfig(
        algorithm=flag_values.all_reduce_alg, num_packs=flag_values.num_packs,
        bytes_per_pack=flag_values.all_reduce_bytes_per_pack,
        weight_factors=flag_values.all_reduce_weight_factors)


def prefetch_from_flags(flag_values: flags.FlagValues) -> device_input.DevicePrefetch:
    if 'prefetch_to_device' not in flag_values:
        return device_input.DevicePrefetch()
    return device_input.DevicePrefetch(to_device=flag_values.prefetch_to_device,
                                       buffer_size=flag_values.per_replica_buffer_size)


def threads_from_flags(flag_values: flags.FlagValues) -> threads.ThreadConfig:
    if 'inter_op_threads' not in flag_values:
        return threads.ThreadConfig()
    return threads.ThreadConfig(
        inter_op_threads=flag_values.inter_op_threads,
        intra_op_threads=flag_values.intra_op_threads,
        gpu_thread_mode=flag_values.gpu_thread_mode,
        gpu_thread_count=flag_values.gpu_thread_count)
