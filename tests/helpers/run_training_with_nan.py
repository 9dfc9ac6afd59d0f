"""Runs train_image_classifier.py as a user types it, with a test-only fault point: the
images of chosen input batches are NaN, so the update of the steps that read them is
(their loss may stay finite: a ReLU or max-pool can drop a NaN); with --huge, the
images are 1e8 times larger instead, so those steps' loss is far above
--loss_upper_bound while their update stays finite. --skip_batches drops batches from
the stream instead: the reference a rollback past them must match.

    run_training_with_nan.py --nan_batches=B[,B...] [--huge] [--skip_batches=B[,B...]]
        [train_image_classifier.py flags]

Batch B (from 1) is the B-th element each input pipeline of this process reads, counted
over the pipeline's life, so a rollback that reads on past the batches that diverged
never meets them again. On one device in a fresh run, batch B is trained by step B.
"""
import os
import runpy
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, 'train_image_classifier.py')
USAGE = ('usage: run_training_with_nan.py --nan_batches=B[,B...] [--huge] '
         '[--skip_batches=B[,B...]] [training flags]')


def poisoned(input_fn, batches, huge=False, skipped=()):
    """input_fn whose datasets give NaN (or huge) images in the elements numbered
    `batches`, and leave out those numbered `skipped`."""
    import tensorflow as tf

    def is_one_of(number, numbers):
        return tf.reduce_any(tf.equal(number + 1, tf.constant(numbers, tf.int64)))

    def with_nan(number, element):
        images, *rest = element
        poisoned_images = images * 1e8 if huge else images + float('nan')
        return (tf.where(is_one_of(number, batches), poisoned_images, images), *rest)

    def input_fn_with_nan(*args, **kwargs):
        numbered = input_fn(*args, **kwargs).enumerate()
        if skipped:
            numbered = numbered.filter(lambda number, _: ~is_one_of(number, list(skipped)))
        return numbered.map(with_nan)

    return input_fn_with_nan


def _batches(argument: str):
    return [int(b) for b in argument.split('=', 1)[1].split(',') if b]


def main():
    if len(sys.argv) < 2 or not sys.argv[1].startswith('--nan_batches='):
        sys.exit(USAGE)
    batches, huge, skipped = _batches(sys.argv[1]), False, []
    rest = sys.argv[2:]
    while rest and (rest[0] == '--huge' or rest[0].startswith('--skip_batches=')):
        if rest[0] == '--huge':
            huge = True
        else:
            skipped = _batches(rest[0])
        rest = rest[1:]
    sys.argv = [SCRIPT, *rest]  # cli.startup reads the command line as it loads
    sys.path.insert(0, ROOT)
    from cli import startup  # noqa: F401  (first, as in the script: before TensorFlow)
    from training.loop import trainer as trainer_lib
    real_init = trainer_lib.Trainer.__init__

    def init_with_nan(self, *, input_fn, **kwargs):
        real_init(self, input_fn=poisoned(input_fn, batches, huge, skipped), **kwargs)

    trainer_lib.Trainer.__init__ = init_with_nan
    runpy.run_path(SCRIPT, run_name='__main__')


if __name__ == '__main__':
    main()
