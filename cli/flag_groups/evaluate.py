"""Flag groups of evaluation: Evaluation, Continuous evaluation; and the Benchmark of the
training and evaluation scripts (docs/performance.md, "Benchmark mode")."""
from absl import flags

from cli.eval_job import EvaluationJob
from training.benchmark import throughput as benchmark_lib
from training.benchmark.throughput import BenchmarkConfig
from training.checkpoints.watch import WatchConfig

# The flags belong to the script calling cli.flags.define(): absl files them under it, so
# its --helpfull and its flags.txt (cli.run_record) list them.
flags.disclaim_key_flags()


def evaluation(define):
    define.string('eval_dir', '/tmp/tfmodel/', 'Where metrics.json, metrics.jsonl and the '
                  'event file are written.')
    define.integer('eval_image_size', None, 'Eval image size; default: the network\'s '
                   'default image size.')
    define.integer('max_num_batches', None, 'Evaluate only this many batches; default: the '
                   'whole split, once.')
    define.list('top_k', [str(k) for k in EvaluationJob.top_k], 'Top-k recalls to report '
                '(k=1 is Accuracy, k=5 slim\'s Recall_5), each for k below the number of '
                'classes (above, it is always 1).')


def continuous_evaluation(define):
    define.float('eval_interval_secs', None, 'Evaluate continuously: watch the train_dir '
                 '--checkpoint_path, looking for new checkpoints every this many seconds, '
                 'and evaluate each once, in order, until the training\'s last (the step '
                 'of its --max_number_of_steps). Unset: evaluate one checkpoint and exit.')
    define.float('eval_timeout_secs', None, 'With --eval_interval_secs: stop when no new '
                 'checkpoint came for this many seconds. Unset: wait for the training\'s '
                 'last checkpoint.')
    define.bool('backfill', WatchConfig.backfill, 'With --eval_interval_secs: also '
                'evaluate the checkpoints already in the train_dir, oldest first (default: '
                'start from the newest). Checkpoints evaluated before into --eval_dir are '
                'skipped either way.')


def benchmark(define):
    """--benchmark: time the script's own compiled step instead of training or
    evaluating (training.benchmark; docs/performance.md, "Benchmark mode")."""
    define.bool('benchmark', False, 'Measure speed instead of training (evaluating): '
                'warm-up steps, then --benchmark_rounds timed rounds of the script\'s own '
                'compiled step; prints img/s, forward GFLOP per image, achieved GFLOP/s, '
                'the fraction of a matmul peak measured in this process and, with '
                '--dataset_dir, the share of step time spent waiting for input. Synthetic '
                'data unless --dataset_dir is given; fresh weights (evaluation: '
                '--checkpoint_path\'s if given). Writes no checkpoint and nothing to '
                '--train_dir or --eval_dir.')
    define.string('benchmark_json', None, 'With --benchmark: also write the figures to '
                  'this JSON file (the same fields as printed).')
    define.integer('benchmark_rounds', BenchmarkConfig.rounds, 'With --benchmark: timed '
                   'rounds; each figure is the median [min, max] over them.')
    define.integer('benchmark_steps', None, 'With --benchmark: timed steps (evaluation: '
                   'batches) per round; default: as many as take about '
                   f'{benchmark_lib.ROUND_SECONDS:g} s at the warm-up\'s speed.')
    define.integer('benchmark_warmup_steps', BenchmarkConfig.warmup_steps, 'With '
                   '--benchmark: untimed steps (evaluation: batches) first; the first '
                   'traces and compiles the step.')
