r"""Where a training step's time goes: kernel time per op type, from TensorFlow's profiler.

  .venv/bin/python benchmarks/step_profile.py --model_name=mobilenet_v1 --batch_size=32

Builds --model_name at its default size, trains it on one synthetic batch (momentum SGD,
softmax cross-entropy) for --warmup_steps untimed steps, then profiles --steps steps and
prints the wall time per step and, per op type (the kernel's name, e.g.
_MklNativeConv2DBackpropFilter), the kernel time per step summed over the threads that
run ops. Those threads overlap, so the sum exceeds the wall time; the shares still say
which kernels dominate.
"""
import collections
import glob
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cli import startup  # noqa: E402,F401  (first: configures TensorFlow before it loads)
from absl import app, flags  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

from benchmarks import plain_step  # noqa: E402
from nets import nets_factory  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string('model_name', 'mobilenet_v1', 'Net to profile.')
flags.DEFINE_integer('batch_size', 32, 'Batch size.')
flags.DEFINE_integer('image_size', None, 'Image size; default: the net\'s.')
flags.DEFINE_integer('warmup_steps', 3, 'Untimed steps (the first traces).')
flags.DEFINE_integer('steps', 3, 'Profiled steps.')
flags.DEFINE_integer('top', 18, 'Op types printed.')


def _kernel_times(xspace_path):
    """{op type: seconds} over the host's op-running threads, and per type the count."""
    space = xplane_pb2.XSpace()
    with open(xspace_path, 'rb') as f:
        space.ParseFromString(f.read())
    seconds, counts = collections.Counter(), collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith('/host:CPU'):
            continue
        for line in plane.lines:
            if not line.name.startswith('tf_Compute'):  # the threads that run ops
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ':' not in name or '::' in name:  # the executor's spans, not kernels
                    continue
                op_type = name.rsplit(':', 1)[1]
                seconds[op_type] += event.duration_ps / 1e12
                counts[op_type] += 1
    return seconds, counts


def main(argv):
    del argv
    size = FLAGS.image_size or nets_factory.get_spec(FLAGS.model_name).default_image_size
    network = nets_factory.get_network_fn(FLAGS.model_name, 1001, is_training=True)
    network.build((size, size, 3))
    optimizer = tf.keras.optimizers.SGD(0.01, momentum=0.9)
    images = tf.random.normal([FLAGS.batch_size, size, size, 3], seed=0)
    labels = tf.zeros([FLAGS.batch_size], tf.int64)

    step = plain_step.make_train_step(network, optimizer)

    for _ in range(FLAGS.warmup_steps):
        step(images, labels).numpy()
    with tempfile.TemporaryDirectory() as log_dir:
        tf.profiler.experimental.start(log_dir)
        started = time.perf_counter()
        for _ in range(FLAGS.steps):
            step(images, labels).numpy()
        wall = (time.perf_counter() - started) / FLAGS.steps
        tf.profiler.experimental.stop()
        path, = glob.glob(f'{log_dir}/plugins/profile/*/*.xplane.pb')
        seconds, counts = _kernel_times(path)
    total = sum(seconds.values())
    print(f'{FLAGS.model_name}, batch {FLAGS.batch_size}, {size}x{size}: '
          f'{wall * 1e3:.0f} ms per step (wall, profiled), kernel time '
          f'{total / FLAGS.steps * 1e3:.0f} ms per step summed over threads')
    for op_type, spent in seconds.most_common(FLAGS.top):
        print(f'{op_type:48s} {spent / FLAGS.steps * 1e3:8.1f} ms  {spent / total:6.1%}  '
              f'x{counts[op_type] // FLAGS.steps}')


if __name__ == '__main__':
    app.run(main)
