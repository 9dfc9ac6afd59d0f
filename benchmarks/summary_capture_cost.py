r"""What TensorBoard's in-step capture (training.summaries.capture) costs per step.

  .venv/bin/python benchmarks/summary_capture_cost.py --model_name=cifarnet \
      --batch_size=128 --rounds=5

Three variants of the toolkit's compiled train loop (what train_image_classifier.py
runs), each in its own process (the allocator's state carries over inside one), on a
synthetic batch repeated:
  off       the capture compiled out (its two calls made no-ops): the step as it was
            before the capture existed;
  unarmed   the capture compiled in, never armed (--save_summaries_secs larger than the
            run): what every step between summaries pays;
  armed     armed for the last step of every call (as when a summary is due after
            every call), summaries themselves not written.
The variants alternate for --rounds rounds. A run times --calls calls of
--steps_per_call steps after --warmup_calls untimed ones; its figure is the median
sec/step of its calls. Printed: each variant's median ms/step, and its ratio to the
same round's `off`, median [min, max] over rounds.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cli import startup  # noqa: E402,F401  (first: configures TensorFlow before it loads)
from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string('model_name', 'cifarnet', 'Network to train.')
flags.DEFINE_integer('batch_size', 128, 'Batch size.')
flags.DEFINE_list('variants', ['off', 'unarmed', 'armed'], 'Variants to compare; the '
                  'first is the reference of the ratios.')
flags.DEFINE_integer('rounds', 5, 'Interleaved rounds.')
flags.DEFINE_integer('steps_per_call', 10, 'Steps per call of the compiled loop.')
flags.DEFINE_integer('calls', 8, 'Timed calls per run.')
flags.DEFINE_integer('warmup_calls', 2, 'Untimed calls per run (the first traces).')
flags.DEFINE_string('precision', 'float32', 'Compute precision.')
flags.DEFINE_bool('jit_compile', False, 'XLA-compile the step.')
flags.DEFINE_string('child', None, 'Internal: run one variant and print its sec/step.')


def _measure_variant(variant: str) -> float:
    """Median sec/step of one run of `variant` in this process."""
    import numpy as np
    import tensorflow as tf

    from deployment import model_deploy
    from nets import nets_factory
    from training.recipes import optimizers
    from training.summaries import capture as capture_lib
    from training.loop import trainer as trainer_lib

    if variant == 'off':
        capture_lib.SummaryCapture.capture_activations = lambda self, end_points: None
        capture_lib.SummaryCapture.capture_gradients = lambda self, grads: None
    spec = nets_factory.get_spec(FLAGS.model_name)
    shape = (spec.default_image_size, spec.default_image_size, 3)
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (FLAGS.batch_size, *shape)).astype(np.float32)
    labels = rng.integers(0, 10, FLAGS.batch_size).astype(np.int64)
    strategy = model_deploy.create_strategy(model_deploy.DeploymentConfig())
    with strategy.scope():
        network = nets_factory.get_network_fn(FLAGS.model_name, 10, is_training=True)
        optimizer = optimizers.create_optimizer(optimizers.OptimizerConfig('momentum'))
    with tempfile.TemporaryDirectory() as train_dir:
        trainer = trainer_lib.Trainer(
            strategy=strategy, network=network, optimizer=optimizer,
            learning_rate_fn=lambda step: tf.constant(0.01),
            input_fn=lambda context=None: tf.data.Dataset.from_tensors(
                (images, labels)).repeat(),
            image_shape=shape,
            config=trainer_lib.TrainConfig(train_dir=train_dir, batch_size=FLAGS.batch_size,
                                          precision=FLAGS.precision,
                                          jit_compile=FLAGS.jit_compile))
        capture = trainer.model_step.summary_capture
        times = []
        for call in range(FLAGS.warmup_calls + FLAGS.calls):
            step = int(trainer.global_step.numpy())
            capture.arm(step + FLAGS.steps_per_call - 1 if variant == 'armed' else None)
            started = time.perf_counter()
            trainer.run_steps(FLAGS.steps_per_call)
            if call >= FLAGS.warmup_calls:
                times.append((time.perf_counter() - started) / FLAGS.steps_per_call)
        held = capture.captured(strategy)
        armed_ran = held['gradients_step'] >= 0 and held['activations_step'] >= 0
        if armed_ran != (variant == 'armed'):
            raise RuntimeError(f'{variant}: the capture ran={armed_ran}, unexpected.')
    return statistics.median(times)


def _run_child(variant: str) -> float:
    command = [sys.executable, os.path.abspath(__file__), f'--child={variant}',
               f'--model_name={FLAGS.model_name}', f'--batch_size={FLAGS.batch_size}',
               f'--steps_per_call={FLAGS.steps_per_call}', f'--calls={FLAGS.calls}',
               f'--warmup_calls={FLAGS.warmup_calls}', f'--precision={FLAGS.precision}',
               f'--jit_compile={FLAGS.jit_compile}']
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800,
                            check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith('sec/step ')]
    if result.returncode != 0 or not lines:
        sys.exit(f'{variant} failed:\n{result.stderr[-3000:]}')
    return float(lines[-1].split()[1])


def main(argv):
    del argv
    if FLAGS.child:
        print(f'sec/step {_measure_variant(FLAGS.child):.6f}', flush=True)
        return
    times = {variant: [] for variant in FLAGS.variants}
    for round_number in range(FLAGS.rounds):
        for variant in FLAGS.variants:
            times[variant].append(_run_child(variant))
        print(f'round {round_number + 1}: ' + ', '.join(
            f'{v} {times[v][-1] * 1000:.1f} ms' for v in FLAGS.variants), flush=True)
    reference = FLAGS.variants[0]
    print(f'{FLAGS.model_name}, batch {FLAGS.batch_size}, {FLAGS.precision}'
          f'{", XLA" if FLAGS.jit_compile else ""}, {FLAGS.rounds} rounds; ms/step '
          f'(median) and step time / {reference} of the same round, median [min, max]:')
    for variant in FLAGS.variants:
        ratios = [t / r for t, r in zip(times[variant], times[reference])]
        print(f'  {variant:<8} {statistics.median(times[variant]) * 1000:7.1f} ms/step  '
              f'{statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]')


if __name__ == '__main__':
    app.run(main)
