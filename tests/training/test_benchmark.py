"""Benchmark mode's library: the FLOP count against layer arithmetic done by hand, the
figures of a training and an evaluation benchmark, the input wait, the peak sampled
around each round, the report and its flag on a fraction above the peak."""
import json
import time

import numpy as np
import pytest
import tensorflow as tf

from core.errors import UsageError
from nets import flops, nets_factory
from training.benchmark import rounds, throughput
from training.evaluation import evaluator as evaluator_lib
from training.benchmark.report import BenchmarkResult, Setting, Spread
from training.loop import controller
from training.loop import trainer as trainer_lib
from training.recipes import optimizers

QUICK = dict(rounds=2, steps_per_round=3, warmup_steps=2, peak_matrix_size=256,
             peak_seconds=0.01)


def test_cifarnet_forward_flops_equal_its_layer_arithmetic():
    # Multiply-adds per layer from cifarnet's shapes: 'SAME' 5x5 convs, 2x2 max pools.
    conv1 = (32 * 32 * 64) * (5 * 5 * 3)    # 32x32x3 image -> 32x32x64
    conv2 = (16 * 16 * 64) * (5 * 5 * 64)   # pool1 -> 16x16x64 -> 16x16x64
    fc3 = (8 * 8 * 64) * 384                # pool2 -> 8x8x64 = 4096 -> 384
    fc4 = 384 * 192
    logits = 192 * 10
    network = nets_factory.get_network_fn('cifarnet', 10)
    network.build((32, 32, 3))
    assert flops.network_forward_flops(network, (32, 32, 3)) == 2 * (
        conv1 + conv2 + fc3 + fc4 + logits)


def test_the_count_follows_strides_depthwise_transposes_and_called_functions():
    @tf.function(autograph=False)
    def strided(x):  # a function called from the traced one: its ops count too
        return tf.nn.conv2d(x, tf.ones([3, 3, 16, 4]), 2, 'VALID')

    def forward(x):  # x: [1, 9, 9, 8]
        y = tf.nn.depthwise_conv2d(x, tf.ones([3, 3, 8, 2]), [1, 1, 1, 1], 'SAME')
        z = strided(y)  # [1, 4, 4, 4]
        return tf.matmul(tf.reshape(z, [64, 1]), tf.ones([64, 7]), transpose_a=True)

    depthwise = (9 * 9 * 16) * (3 * 3)  # each output: one 3x3 window of one channel
    conv = (4 * 4 * 4) * (3 * 3 * 16)
    matmul = 7 * 64
    assert flops.forward_flops(forward, (9, 9, 8)) == 2 * (depthwise + conv + matmul)


def test_an_unknown_shape_is_refused_by_name():
    def forward(x):
        ragged = tf.reshape(x, tf.stack([tf.reduce_sum(tf.cast(x > 0, tf.int32)), -1]))
        return tf.matmul(ragged, tf.ones([4, 2]))

    with pytest.raises(ValueError, match='MatMul .* not fully known'):
        flops.forward_flops(forward, (4,))


def _setting(task, image_shape=(28, 28, 1), batch_size=8):
    return Setting(model_name='lenet', task=task, precision='float32',
                   batch_size=batch_size, replicas=1, image_shape=image_shape,
                   data='test data')


def _lenet_trainer(train_dir, batch_size=8):
    with tf.distribute.get_strategy().scope():
        network = nets_factory.get_network_fn('lenet', 10, is_training=True)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig('sgd'))
    return trainer_lib.Trainer(
        strategy=tf.distribute.get_strategy(), network=network, optimizer=optimizer,
        learning_rate_fn=lambda step: tf.constant(0.01),
        input_fn=throughput.synthetic_input_fn(batch_size, (28, 28, 1), 10),
        image_shape=(28, 28, 1),
        config=trainer_lib.TrainConfig(train_dir=str(train_dir), batch_size=batch_size))


def _slow_input_fn(seconds_per_batch, batch_size=8):
    """Synthetic batches, each delayed: an input pipeline the step waits for."""
    synthetic = throughput.synthetic_input_fn(batch_size, (28, 28, 1), 10)

    def delayed(images, labels):
        waited = tf.py_function(lambda: time.sleep(seconds_per_batch) or 0, [], tf.int32)
        with tf.control_dependencies([waited]):
            return tf.identity(images), labels

    return lambda context=None: synthetic(context).map(delayed)


def test_training_benchmark_runs_the_trainers_step_and_measures_the_input_wait(tmp_path):
    trainer = _lenet_trainer(tmp_path / 'train')
    run = throughput.benchmark_training(
        trainer, throughput.BenchmarkConfig(**QUICK), _setting('training'), num_classes=10,
        real_input_fn=_slow_input_fn(0.05))
    result = run.result
    # Warm-up (2 steps) and 2 rounds of 3 on each input (the real one's after an untimed
    # round), all by the Trainer's own step.
    assert int(trainer.global_step.numpy()) == (2 + 3 + 2 * 3) + (2 + 2 * 3)
    assert not (tmp_path / 'train').exists()
    assert (result.rounds, result.steps_per_round) == (2, 3)
    forward = flops.network_forward_flops(trainer.network, (28, 28, 1))
    assert result.forward_flops_per_image == forward
    for speed, achieved, peak, fraction in zip(
            result.images_per_second.per_round, result.achieved_gflops.per_round,
            result.peak_gflops.per_round, result.fraction_of_peak.per_round):
        assert achieved == pytest.approx(3 * forward * speed / 1e9)
        assert fraction == pytest.approx(achieved / peak)
    # The headline speed is the real input's: a round's 3 batches of 8 take at least 2
    # delays of 50 ms (its first may have been made during the round before).
    assert result.images_per_second.high < 3 * 8 / (2 * 0.05)
    assert result.synthetic_images_per_second.low > 2 * result.images_per_second.high
    # lenet's step takes milliseconds: most of the real step time is waiting.
    assert 0.5 < result.input_wait.median < 1


def test_synthetic_only_has_no_input_wait_and_steps_fill_the_round_time(tmp_path,
                                                                       monkeypatch):
    monkeypatch.setattr(throughput, 'ROUND_SECONDS', 0.5)
    trainer = _lenet_trainer(tmp_path / 'train')
    config = throughput.BenchmarkConfig(rounds=1, warmup_steps=3, peak_matrix_size=256,
                                        peak_seconds=0.01)
    result = throughput.benchmark_training(trainer, config, _setting('training'),
                                          num_classes=10).result
    assert result.input_wait is None and result.synthetic_images_per_second is None
    assert 'input wait    n/a with synthetic data' in result.text()
    # About 0.5 s of steps: well over one step of lenet, and the round took about that.
    assert result.steps_per_round > 5
    seconds = result.steps_per_round * 8 / result.images_per_second.median
    assert 0.1 < seconds < 2.5


def test_evaluation_benchmark_times_the_evaluators_counting_loop():
    network = nets_factory.get_network_fn('lenet', 10)
    network.build((28, 28, 1))
    evaluator = evaluator_lib.Evaluator(network, num_classes=10)
    result = throughput.benchmark_evaluation(
        evaluator, throughput.BenchmarkConfig(**QUICK), _setting('evaluation'),
        batch_size=8).result
    forward = flops.network_forward_flops(network, (28, 28, 1))
    assert result.achieved_gflops.per_round == pytest.approx(
        [forward * speed / 1e9 for speed in result.images_per_second.per_round])
    assert '(forward x img/s)' in result.text()


def test_count_only_reads_the_batches_asked_for_or_to_the_end():
    network = nets_factory.get_network_fn('lenet', 10)
    network.build((28, 28, 1))
    evaluator = evaluator_lib.Evaluator(network, num_classes=10)
    images = np.zeros([12, 28, 28, 1], np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((images, np.zeros(12, np.int64))).batch(4)
    iterator = evaluator.batches(dataset, 4)
    assert evaluator.count_only(iterator, 2) == 2
    assert evaluator.count_only(iterator, 5) == 1  # the third and last batch


def test_the_peak_is_a_matmul_rate_in_the_compute_dtype():
    peak = throughput.MatmulPeak(tf.bfloat16, size=256)
    assert peak.dtype == tf.bfloat16 and peak.gflops() > 0


class _FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_peak_is_sampled_for_the_time_asked_and_at_least_three_times():
    clock = _FakeClock()

    def matmul_taking(seconds):
        def rate():
            clock.now += seconds
            return 1 / seconds
        return rate

    # 0.6 s matmuls: the fourth ends the 2 s (at 2.4 s).
    assert len(rounds.sample_rates(matmul_taking(0.6), 2.0, clock=clock)) == 4
    # However fast the matmul, three samples.
    assert len(rounds.sample_rates(matmul_taking(0.01), 0.0, clock=clock)) == 3


def test_a_rounds_peak_is_the_fastest_matmul_before_or_after_it():
    # A disturbance slowing some matmuls (the 90s, the 50s) moves no round's peak.
    windows = [[200, 90, 205], [203, 50, 60], [90, 201, 199]]
    assert rounds.round_peaks(windows) == [205, 203]


def test_measure_divides_each_round_by_the_peak_sampled_around_it(monkeypatch):
    samples = iter([100, 200, 150,   # before round 1
                    50, 60, 70,      # after round 1, before round 2: disturbed
                    210, 190, 205])  # after round 2

    class ScriptedPeak:
        def __init__(self, dtype, size):
            self.size = size

        def gflops(self):
            return next(samples)

    monkeypatch.setattr(throughput, 'MatmulPeak', ScriptedPeak)
    config = throughput.BenchmarkConfig(rounds=2, steps_per_round=2, warmup_steps=1,
                                        peak_seconds=0.0)
    result = throughput.measure(_setting('evaluation'), config,
                                runs={'synthetic': lambda n: time.sleep(0.01 * n)},
                                images_per_step=8, forward_flops_per_image=10 ** 9)
    assert result.peak_gflops.per_round == (200, 210)
    assert result.fraction_of_peak.per_round == pytest.approx(
        [a / p for a, p in zip(result.achieved_gflops.per_round, (200, 210))])
    assert next(samples, None) is None  # three windows: before, between, after


def test_paced_steps_run_in_the_controllers_call_lengths():
    clock, calls = _FakeClock(), []

    def train_n_steps(num_steps):
        calls.append(num_steps)
        clock.now += 0.5 * num_steps  # 0.5 s a step: 2 s calls hold 4 steps

    paced = controller.PacedSteps(train_n_steps, steps_per_loop=100, log_every_n_steps=10,
                                  clock=clock)
    paced.run(12)
    # One step first (it traces); calls of at most 4 steps, ending at the log line
    # (step 10) and at the 12 asked for.
    assert calls == [1, 4, 4, 1, 2]
    paced.run(5)
    assert calls[5:] == [4, 1] and paced.step == 17


def _result(fractions, peak_seconds=2.0):
    count = len(fractions)
    return BenchmarkResult(
        setting=_setting('training', (224, 224, 3), 32), rounds=count,
        steps_per_round=10, warmup_steps=3, images_per_second=Spread.of([14] * count),
        forward_flops_per_image=6_964_510_720, peak_dtype='bfloat16',
        peak_matrix_size=4096, peak_seconds=peak_seconds,
        peak_gflops=Spread.of([400] * count), achieved_gflops=Spread.of([300] * count),
        fraction_of_peak=Spread.of(fractions))


def _of_peak_line(result):
    return next(line for line in result.text().splitlines() if 'of peak' in line)


def test_a_fraction_above_the_peak_is_flagged_not_given_as_a_figure():
    result = _result([0.80, 1.28, 0.78])
    assert _of_peak_line(result) == (
        '  of peak       0.79 median [0.78, 0.80] of 2 rounds (above peak: round 2 at '
        '1.28; the machine was disturbed; re-run)')
    assert result.as_json()['fraction_of_peak'] == {
        'median': 0.79, 'min': 0.78, 'max': 0.80, 'per_round': [0.80, 1.28, 0.78],
        'rounds_above_peak': [2]}
    every = _result([1.05, 1.28])
    assert _of_peak_line(every) == (
        '  of peak       n/a (above peak: round 1 at 1.05, round 2 at 1.28; the machine '
        'was disturbed; re-run)')
    assert every.as_json()['fraction_of_peak']['median'] is None
    assert _result([0.8, 1.0]).as_json()['fraction_of_peak']['rounds_above_peak'] == []


def test_report_prints_and_writes_every_figure(tmp_path):
    result = BenchmarkResult(
        setting=_setting('training', (224, 224, 3), 32), rounds=3, steps_per_round=10,
        warmup_steps=3, images_per_second=Spread.of([13.9, 14.2, 14.5]),
        forward_flops_per_image=6_964_510_720, peak_dtype='float32', peak_matrix_size=4096,
        peak_seconds=2.0, peak_gflops=Spread.of([210, 212, 216]), achieved_gflops=Spread.of([290, 297, 303]),
        fraction_of_peak=Spread.of([0.78, 0.80, 0.81]),
        synthetic_images_per_second=Spread.of([14, 15, 16]),
        input_wait=Spread.of([0.001, 0.05, 0.1]))
    assert result.text().splitlines() == [
        'Benchmark: lenet training, float32, batch 32, 224x224x3, test data',
        '  speed         14.2 img/s median [13.9, 14.5] over 3 rounds of 10 steps (after 3 '
        'warm-up steps)',
        '  forward       6.96 GFLOP per image (traced graph: conv and matmul, 2 FLOPs per '
        'multiply-add)',
        '  achieved      297 GFLOP/s median [290, 303] (3 x forward x img/s: forward and '
        'backward)',
        '  matmul peak   212 GFLOP/s median [210, 216] (float32 4096x4096 matmul, the '
        'fastest in 2 s before and after each round, this process)',
        '  of peak       0.80 median [0.78, 0.81]',
        '  input wait    5.0 % median [0.1 %, 10.0 %] of step time (against synthetic '
        'data: 15 img/s median [14, 16])']
    path = tmp_path / 'new' / 'throughput.json'
    result.write_json(str(path))
    written = json.loads(path.read_text())
    assert written['images_per_second'] == {'median': 14.2, 'min': 13.9, 'max': 14.5,
                                            'per_round': [13.9, 14.2, 14.5]}
    assert written['forward_gflop_per_image'] == pytest.approx(6.96451072)
    assert written['peak'] == {'dtype': 'float32', 'matrix_size': 4096,
                               'seconds_sampled': 2.0, 'gflops': {
        'median': 212, 'min': 210, 'max': 216, 'per_round': [210, 212, 216]}}
    assert written['input_wait_fraction']['median'] == 0.05
    assert (written['flops_per_image_factor'], written['task']) == (3, 'training')
    with pytest.raises(UsageError, match='--benchmark_json=.*writable'):
        result.write_json(str(path / 'under_a_file.json'))


def test_options_out_of_range_and_cluster_modes_are_refused():
    with pytest.raises(UsageError, match='--benchmark_rounds=0'):
        throughput.BenchmarkConfig(rounds=0)
    with pytest.raises(UsageError, match='--benchmark_steps=0 .* about 10 s'):
        throughput.BenchmarkConfig(steps_per_round=0)
    with pytest.raises(UsageError, match='one process.*drop the cluster flags'):
        throughput.check_one_process('parameter_server')
    throughput.check_one_process('mirrored')
