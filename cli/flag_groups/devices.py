"""Flag groups of where the model runs: Devices, Device performance (docs/performance.md,
"GPU"; the all-reduce flags are the TF Model Garden's), Cluster."""
from absl import flags

from cli import data_service_job
from core import threads
from core.threads import ThreadConfig
from deployment import cluster as cluster_lib
from deployment import kubernetes
from deployment import model_deploy
from deployment.collectives import AllReduceConfig
from deployment.device_input import DevicePrefetch
from deployment.model_deploy import DeploymentConfig

# The flags belong to the script calling cli.flags.define(): absl files them under it, so
# its --helpfull and its flags.txt (cli.run_record) list them.
flags.disclaim_key_flags()


def devices(define):
    define.integer('num_clones', DeploymentConfig.num_clones, 'Model clones (replicas) on '
                   'this machine, each taking --batch_size examples a step.')
    define.bool('clone_on_cpu', DeploymentConfig.clone_on_cpu, 'Put the clones on logical '
                'CPU devices.')
    define.string('master', '', 'TF-Slim\'s TF1 session target: accepted so slim\'s '
                  'command lines run unchanged, and not needed (a cluster is '
                  '--worker_hosts, --ps_hosts or TF_CONFIG).')


def device_performance(define):
    """All-reduce, input prefetch to the devices, and threads: for GPU hosts mostly."""
    define.string('all_reduce_alg', AllReduceConfig.algorithm, 'How replicas all-reduce '
                  'their gradients (the TF Model Garden\'s flag). Clones on GPUs '
                  '(--num_clones): nccl (NcclAllReduce) or hierarchical_copy '
                  '(HierarchicalCopyAllReduce); workers without ps tasks '
                  '(MultiWorkerMirroredStrategy): ring or nccl. Unset: TensorFlow\'s '
                  'choice (between workers AUTO; clones on CPU reduce on one device).')
    define.integer('num_packs', AllReduceConfig.num_packs, 'With --all_reduce_alg=nccl or '
                   'hierarchical_copy on clones: packs the gradients are batched into for '
                   'the all-reduce (0: no packing).')
    define.integer('all_reduce_bytes_per_pack', AllReduceConfig.bytes_per_pack, 'Between '
                   'workers without ps tasks: the gradients are all-reduced in packs of '
                   'about this many bytes, each as soon as backprop has computed it, so '
                   'that communication overlaps the rest of the backward pass. 0: one pack '
                   'after the whole backward pass (TensorFlow\'s default).')
    define.bool('all_reduce_weight_factors', AllReduceConfig.weight_factors, 'Between '
                'workers without ps tasks: a fully connected weight (or a conv covering '
                'its whole input) whose gradient\'s factors, the layer\'s inputs and '
                'output gradients of every replica, are at most half its size is '
                'all-reduced as those factors, and each worker multiplies them: the same '
                'sum in another order, for fewer bytes (cifarnet: 1.7 MB instead of 7.0 MB '
                'per step on 2 workers). Not with --precision=mixed_float16 or '
                '--gradient_accumulation_steps, nor in quantization-aware nets.')
    define.bool('prefetch_to_device', DevicePrefetch.to_device, 'Prefetch input batches '
                'into each replica\'s device memory (TensorFlow\'s default); '
                '--noprefetch_to_device keeps them in host memory. Applies where the '
                'strategy distributes the input: parameter-server workers, multi-worker '
                'all-reduce with --nocheckpoint_input_position, evaluation with '
                '--num_clones; not one device, nor training clones on one host or '
                'all-reduce workers saving their input position (their batches are '
                'copied inside the step).')
    define.integer('per_replica_buffer_size', DevicePrefetch.buffer_size, 'Batches '
                   'prefetched per replica where --prefetch_to_device applies (0: none).')
    define.integer('inter_op_threads', ThreadConfig.inter_op_threads, 'Threads running '
                   'independent ops at once; 0: TensorFlow\'s choice (all the cores), or '
                   'for all-reduce workers sharing a host, their share of its cores. Set '
                   'before TensorFlow starts.')
    define.integer('intra_op_threads', ThreadConfig.intra_op_threads, 'Threads one op (a '
                   'convolution, a matmul) uses on the CPU; 0: as --inter_op_threads.')
    define.enum('gpu_thread_mode', None, list(threads.GPU_THREAD_MODES), 'The threads '
                'launching GPU kernels (TF_GPU_THREAD_MODE): global shares TensorFlow\'s '
                'pool (its default), gpu_private gives each GPU a pool of its own, '
                'gpu_shared one pool for all GPUs. Unset: the environment\'s setting. No '
                'effect without a GPU.')
    define.integer('gpu_thread_count', None, 'Threads of each GPU pool with '
                   '--gpu_thread_mode=gpu_private or gpu_shared (TF_GPU_THREAD_COUNT; '
                   'TensorFlow\'s default: 2).')


def cluster(define):
    """The cluster, as TF1's distributed trainers named it (else TF_CONFIG or SLURM)."""
    define.enum('strategy', DeploymentConfig.strategy, list(model_deploy.STRATEGIES),
                'Force a distribution strategy; auto chooses from --num_clones, '
                '--worker_replicas and --num_ps_tasks.')
    define.integer('worker_replicas', DeploymentConfig.num_replicas, 'Number of worker '
                   'machines.')
    define.integer('num_ps_tasks', DeploymentConfig.num_ps_tasks, 'Number of parameter '
                   'servers; 0 means variables live on the workers.')
    define.bool('sync_replicas', DeploymentConfig.sync_replicas, 'Synchronise the worker '
                'replicas\' updates over the parameter servers.')
    define.integer('replicas_to_aggregate', DeploymentConfig.replicas_to_aggregate,
                   'Gradients to collect before each update (--sync_replicas).')
    define.string('ps_hosts', None, 'Comma-separated host:port of the parameter servers.')
    define.string('worker_hosts', None, 'Comma-separated host:port of the workers; the '
                  'first is the chief.')
    define.enum('job_name', None, ['ps', 'worker', *data_service_job.JOB_NAMES],
                'This process\'s job in the cluster; with --task, which task it is. '
                'data_dispatcher and data_worker serve the tf.data service instead (see '
                '--data_service_address).')
    define.integer('task', 0, 'This task\'s index in its job (--job_name); worker 0 is the '
                   'chief.')
    define.alias('task_id', 'task', 'TF1\'s distributed trainers\' name for --task.')
    define.float('wait_for_chief_secs', DeploymentConfig.wait_for_chief_secs, 'How long a '
                 'ps or worker task keeps serving after the chief became unreachable (a '
                 'restarted chief resumes within it); then it exits.')
    define.float('preemption_grace_secs', DeploymentConfig.preemption_grace_secs, 'The '
                 'launcher\'s time from SIGTERM to SIGKILL (Kubernetes\' '
                 'terminationGracePeriodSeconds, SLURM\'s KillWait). On SIGTERM the ps and '
                 'worker tasks the chief schedules on serve until the chief has saved, '
                 'exiting before it ends; the chief warns when its final save took longer.')
    define.integer('slurm_base_port', cluster_lib.SLURM_BASE_PORT, 'Under SLURM, task k of '
                   'a node listens on this port + k.')
    define.string('kubernetes_service', None, 'Take the cluster and this task from the '
                  'pod of a Kubernetes Indexed Job or JobSet: the headless Service its pods\' '
                  'subdomain names (a JobSet\'s: its name, unless spec.network.subdomain). '
                  'Needs --worker_replicas (and --num_ps_tasks with ps pods); '
                  'docs/distributed.md, "Kubernetes".')
    define.integer('kubernetes_port', kubernetes.DEFAULT_PORT, 'With --kubernetes_service: '
                   'the port every task listens on.')
