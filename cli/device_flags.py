"""The Device performance flags of the training and evaluation scripts (defined in
cli.flag_groups.devices) -> the configs they give: the all-reduce implementation and the
input's prefetch (both part of the DeploymentConfig) and the thread settings (applied by
the job before any op)."""
from absl import flags

from core import threads
from deployment import collectives, device_input


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
