"""Benchmark mode (--benchmark of the training and evaluation scripts): how fast the
script's own compiled step runs here, against what this machine can compute.

Training times the deployment plan's inner loop (`train_n_steps`, what
train_image_classifier.py runs, with the call lengths its controller chooses);
evaluation times the Evaluator's compiled counting loop. Nothing is saved. A run is:
warm-up steps (the first call traces), then rounds of `steps_per_round` steps, with
4096x4096 matmuls in the compute dtype (the peak) for PEAK_SECONDS before the first
round and after each (training.benchmark.rounds). Every figure is the median [min,
max] over rounds; the fraction of peak is per round (step rate against the fastest
matmul just before or after it), so a load from other processes lasting through a round
hits both alike, and a short one during the matmuls does not move the peak. A fraction
above 1 says the peak was disturbed throughout (the report flags it).

With real input (--dataset_dir) its rounds come first, back to back (see measure), and
the rounds on synthetic data follow. Input wait, per round, is 1 - (rate on the real
input) / (rate of the same step on a synthetic batch of the same shape held in memory),
at least 0: the share of step time the real input pipeline adds. With synthetic data
alone there is nothing to compare it with.
"""
import dataclasses
import functools
import time
from typing import Callable, Dict, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from core import checks
from core.errors import UsageError
from deployment import model_deploy
from nets import flops
from nets import precision as precision_lib
from training.benchmark.rounds import PEAK_SECONDS, round_peaks, sample_rates
from training.benchmark.report import BenchmarkResult, Setting, Spread
from training.loop import controller

# Without --benchmark_steps, a round runs about this long at the warm-up's speed.
ROUND_SECONDS = 10.0
PEAK_MATRIX_SIZE = 4096
SYNTHETIC = 'synthetic data'


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    rounds: int = 5
    steps_per_round: Optional[int] = None  # None: about ROUND_SECONDS of steps
    warmup_steps: int = 3  # the first traces the step
    json_path: Optional[str] = None
    peak_matrix_size: int = PEAK_MATRIX_SIZE  # smaller in tests only
    peak_seconds: float = PEAK_SECONDS  # shorter in tests only

    def __post_init__(self):
        checks.check_at_least(1, benchmark_rounds=self.rounds,
                              benchmark_warmup_steps=self.warmup_steps)
        checks.check_at_least(1, unset=f'about {ROUND_SECONDS:g} s of steps per round',
                              benchmark_steps=self.steps_per_round)


def check_one_process(mode: str):
    """The benchmark times this process's steps: one device or clones on this host."""
    if mode not in (model_deploy.ONE_DEVICE, model_deploy.MIRRORED):
        raise UsageError(f'--benchmark runs in one process (one device, or --num_clones '
                         f'on this host), not under the {mode} strategy; drop the cluster '
                         'flags (--worker_hosts, --ps_hosts, --num_ps_tasks, '
                         '--worker_replicas, --strategy).')


def synthetic_input_fn(batch_size: int, image_shape, num_classes: int,
                       seed: int = 0) -> Callable:
    """An input_fn repeating one batch of random preprocessed images (in [-1, 1]) and
    labels, made once and held in memory: a step reading it waits for no input."""
    rng = np.random.default_rng(seed)
    images = rng.uniform(-1, 1, (batch_size, *image_shape)).astype(np.float32)
    labels = rng.integers(0, num_classes, batch_size).astype(np.int64)
    batch = (tf.constant(images), tf.constant(labels))
    return lambda context=None: tf.data.Dataset.from_tensors(batch).repeat()


def describe_data(dataset_name: str, split_name: str, dataset_dir: Optional[str]) -> str:
    return (f'{dataset_name}/{split_name} from {dataset_dir}' if dataset_dir
            else SYNTHETIC)


class MatmulPeak:
    """The rate of one size x size matmul in `dtype` in this process, in GFLOP/s."""

    def __init__(self, dtype: tf.DType, size: int = PEAK_MATRIX_SIZE):
        self.dtype, self.size = dtype, size
        # Arguments, not captured constants: Grappler would fold a constant product.
        self._left = tf.cast(tf.random.stateless_uniform([size, size], [1, 2], -1, 1),
                             dtype)
        self._right = tf.cast(tf.random.stateless_uniform([size, size], [3, 4], -1, 1),
                              dtype)
        self._product = tf.function(lambda a, b: tf.matmul(a, b)[0, 0], autograph=False)
        self.gflops()  # traces and allocates

    def gflops(self) -> float:
        """One matmul's rate."""
        started = time.perf_counter()
        self._product(self._left, self._right).numpy()
        return 2 * self.size ** 3 / (time.perf_counter() - started) / 1e9


def _timed(run: Callable[[int], None], num_steps: int) -> float:
    started = time.perf_counter()
    run(num_steps)
    return time.perf_counter() - started


def _warm_up(runs: Dict[str, Callable], config: BenchmarkConfig) -> float:
    """Runs each input's warm-up steps (real last, as its timed rounds follow); returns
    the slowest seconds per step after the first, which traces."""
    seconds_per_step = 0.0
    for name in sorted(runs, key=lambda name: name == 'real'):
        first = _timed(runs[name], 1)
        later = config.warmup_steps - 1
        measured = _timed(runs[name], later) / later if later else first
        seconds_per_step = max(seconds_per_step, measured)
        logging.info('Benchmark warm-up on %s input: %d steps, %.3g s per step after the '
                     'first (%.3g s).', name, config.warmup_steps, measured, first)
    return seconds_per_step


def measure(setting: Setting, config: BenchmarkConfig, *, runs: Dict[str, Callable],
            images_per_step: int, forward_flops_per_image: int) -> BenchmarkResult:
    """Warms up and times `runs`: {'synthetic': run, optionally 'real': run}, each
    `run(n)` doing n steps and returning when they are done.

    The real input's rounds run back to back, as the script reads it: during a pause
    (another round, the matmuls) its pipeline would fill its buffers and serve the next
    round's first batches for free. An untimed round first empties what they filled
    during warm-up. The synthetic rounds follow, between the peak's matmul samples.
    """
    seconds_per_step = _warm_up(runs, config)
    steps = config.steps_per_round or max(1, round(ROUND_SECONDS / seconds_per_step))

    def images_per_second(name, round_index):
        rate = steps * images_per_step / _timed(runs[name], steps)
        logging.info('Benchmark round %d/%d on %s input: %.4g img/s.', round_index + 1,
                     config.rounds, name, rate)
        return rate

    real = 'real' in runs
    if real:
        runs['real'](steps)
    real_rates = [images_per_second('real', r) for r in range(config.rounds)] if real else []
    compute_dtype = precision_lib.compute_dtype(setting.precision)
    peak = MatmulPeak(compute_dtype, config.peak_matrix_size)
    windows = [sample_rates(peak.gflops, config.peak_seconds)]
    synthetic_rates = []
    for round_index in range(config.rounds):
        synthetic_rates.append(images_per_second('synthetic', round_index))
        windows.append(sample_rates(peak.gflops, config.peak_seconds))
        logging.info('Benchmark matmuls after round %d/%d: %s GFLOP/s.', round_index + 1,
                     config.rounds, ', '.join(f'{rate:.0f}' for rate in windows[-1]))
    peaks = round_peaks(windows)
    speed = real_rates or synthetic_rates
    achieved = [setting.flops_per_image_factor * forward_flops_per_image * rate / 1e9
                for rate in speed]
    return BenchmarkResult(
        setting=setting, rounds=config.rounds, steps_per_round=steps,
        warmup_steps=config.warmup_steps, images_per_second=Spread.of(speed),
        forward_flops_per_image=forward_flops_per_image,
        peak_dtype=compute_dtype.name, peak_matrix_size=peak.size,
        peak_seconds=config.peak_seconds,
        peak_gflops=Spread.of(peaks), achieved_gflops=Spread.of(achieved),
        fraction_of_peak=Spread.of([a / p for a, p in zip(achieved, peaks)]),
        synthetic_images_per_second=Spread.of(synthetic_rates) if real else None,
        input_wait=Spread.of([max(0.0, 1 - r / s) for r, s in
                              zip(real_rates, synthetic_rates)]) if real else None)


@dataclasses.dataclass(frozen=True)
class BenchmarkRun:
    result: BenchmarkResult
    # The inputs' iterators: kept until the process exits (destroying a distributed
    # iterator can stall, see cli.guard.exit_now).
    keep_alive: tuple = ()


def benchmark_training(trainer, config: BenchmarkConfig, setting: Setting, *,
                       num_classes: int, real_input_fn: Optional[Callable] = None
                       ) -> BenchmarkRun:
    """Times `trainer`'s compiled step (training.loop.trainer.Trainer, built as the script
    builds it) on synthetic batches, and on real_input_fn's when given. Saves nothing."""
    forward = flops.network_forward_flops(trainer.network, setting.image_shape)
    input_fns = {'real': real_input_fn} if real_input_fn is not None else {}
    input_fns['synthetic'] = synthetic_input_fn(setting.batch_size, setting.image_shape,
                                                num_classes)
    loops = {name: trainer.inner_loop(input_fn) for name, input_fn in input_fns.items()}
    # In calls as long as the training's controller makes them.
    runs = {name: controller.PacedSteps(
        steps.train_n_steps, steps_per_loop=trainer.config.steps_per_loop,
        log_every_n_steps=trainer.config.log_every_n_steps).run
        for name, steps in loops.items()}
    per_step = (trainer.plan.examples_per_update(setting.batch_size)
                * trainer.config.gradient_accumulation_steps)
    result = measure(setting, config, runs=runs, images_per_step=per_step,
                     forward_flops_per_image=forward)
    return BenchmarkRun(result, keep_alive=tuple(loops.values()))


def benchmark_evaluation(evaluator, config: BenchmarkConfig, setting: Setting, *,
                         batch_size: int, real_dataset: Optional[tf.data.Dataset] = None
                         ) -> BenchmarkRun:
    """Times the Evaluator's compiled counting loop (training.evaluation.evaluator), batch_size
    examples per step over all replicas, on synthetic batches and on real_dataset's
    (repeated) when given."""
    forward = flops.network_forward_flops(evaluator.network, setting.image_shape)
    synthetic = synthetic_input_fn(batch_size, setting.image_shape,
                                   evaluator.num_classes)()
    datasets = {'real': real_dataset} if real_dataset is not None else {}
    datasets['synthetic'] = synthetic
    iterators = {name: evaluator.batches(dataset.repeat(), batch_size)
                 for name, dataset in datasets.items()}
    runs = {name: functools.partial(evaluator.count_only, iterator)
            for name, iterator in iterators.items()}
    result = measure(setting, config, runs=runs, forward_flops_per_image=forward,
                     images_per_step=evaluator.global_batch(batch_size))
    return BenchmarkRun(result, keep_alive=tuple(iterators.values()))


def report(run: BenchmarkRun, json_path: Optional[str]) -> BenchmarkRun:
    """Prints the result's block (and writes its JSON to json_path); returns the run."""
    print(run.result.text(), flush=True)
    if json_path:
        run.result.write_json(json_path)
        print(f'Benchmark figures written to {json_path}', flush=True)
    return run
