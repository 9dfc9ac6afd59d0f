r"""Seconds from process start to the end of the first training step: our script against
a minimal Keras script training the same architecture (cifarnet) on an in-memory batch.

  .venv/bin/python benchmarks/startup_time.py --dataset_dir=/tmp/shapes --rounds=3

Our side is `train_image_classifier.py --max_number_of_steps=1 --log_every_n_steps=1`
on --dataset_dir (shapes; built first if missing), timed to its 'global step 1' line;
the Keras side prints when its first `train_on_batch` returns. The two alternate
(--rounds each), round i starting with side i mod 2 (training.benchmark.rounds.rotated:
neither always runs first in a round); printed are each side's times and median, and
ours / Keras per round, median [min, max] (the target: at most 1).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from training.benchmark import rounds  # noqa: E402  (no TensorFlow in this process)

KERAS_SCRIPT = '''
import time, numpy as np, tensorflow as tf
layers = tf.keras.layers
model = tf.keras.Sequential([
    tf.keras.Input((32, 32, 3)), layers.Conv2D(64, 5, padding='same', activation='relu'),
    layers.MaxPool2D(2, 2), layers.Conv2D(64, 5, padding='same', activation='relu'),
    layers.MaxPool2D(2, 2), layers.Flatten(), layers.Dense(384, activation='relu'),
    layers.Dropout(0.5), layers.Dense(192, activation='relu'), layers.Dense(10)])
model.compile(optimizer=tf.keras.optimizers.SGD(0.01, momentum=0.9),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
images = np.random.uniform(-1, 1, (32, 32, 32, 3)).astype(np.float32)
model.train_on_batch(images, np.random.randint(0, 10, 32))
print('FIRST_STEP_DONE', flush=True)
'''


def _time_until(command, marker, env):
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        if marker in line:
            elapsed = time.perf_counter() - started
            break
    else:
        raise RuntimeError(f'{command[1]} never printed {marker!r}')
    process.stdout.close()
    process.wait(timeout=120)
    return elapsed


def main():
    args = dict(a.lstrip('-').split('=', 1) for a in sys.argv[1:])
    num_rounds = int(args.get('rounds', 3))
    dataset_dir = args.get('dataset_dir', os.path.join(tempfile.gettempdir(), 'shapes'))
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL='2')
    if not os.path.exists(os.path.join(dataset_dir, 'labels.txt')):
        subprocess.run([sys.executable, 'download_and_convert_data.py',
                        '--dataset_name=shapes', f'--dataset_dir={dataset_dir}'],
                       cwd=ROOT, env=env, check=True, capture_output=True)
    times = {'ours': [], 'keras': []}
    with tempfile.TemporaryDirectory() as scratch:
        sides = {
            'ours': lambda round_index: _time_until(
                [sys.executable, 'train_image_classifier.py', '--dataset_name=shapes',
                 f'--dataset_dir={dataset_dir}', '--model_name=cifarnet',
                 f'--train_dir={scratch}/train_{round_index}', '--batch_size=32',
                 '--max_number_of_steps=1', '--log_every_n_steps=1'], 'global step 1:',
                env),
            'keras': lambda round_index: _time_until(
                [sys.executable, '-c', KERAS_SCRIPT], 'FIRST_STEP_DONE', env)}
        for round_index in range(num_rounds):
            for name in rounds.rotated(list(sides), round_index):
                times[name].append(sides[name](round_index))
    ours, keras = (statistics.median(times[k]) for k in ('ours', 'keras'))
    ratios = [a / b for a, b in zip(times['ours'], times['keras'])]
    print(f'first step after: ours {[round(t, 2) for t in times["ours"]]} s, keras '
          f'{[round(t, 2) for t in times["keras"]]} s; medians {ours:.2f} / {keras:.2f} s; '
          f'ours / keras per round {statistics.median(ratios):.2f} '
          f'[{min(ratios):.2f}, {max(ratios):.2f}]')


if __name__ == '__main__':
    main()
