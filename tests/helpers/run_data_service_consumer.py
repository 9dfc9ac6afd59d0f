"""One training worker's input through the tf.data service, for
tests/datasets/test_data_service.py: the real input_fn (training mode, one epoch) over a
`shapes`-layout split whose labels are example ids; writes the ids it got as JSON.

  python run_data_service_consumer.py DATASET_DIR grpc://host:port OUT.json INDEX COUNT \
      [EPOCHS [SECS_PER_BATCH [WAIT_SECS]]]

It prints `read N` after each batch (N ids so far), for tests that act mid-run.

It creates its iterator, says so with OUT.json.ready, and waits (bounded) for the other
consumers' .ready files, so that all of them read the job at once.
"""
import json
import pathlib
import sys
import time

import tensorflow as tf

from datasets import data_service, dataset_factory, input_pipeline

BATCH_SIZE = 4
READY_WAIT_SECS = 120


def preprocess(image, height, width, seed=None):
    del seed  # augmentation is not what this test checks
    return tf.image.resize(tf.cast(image, tf.float32), [height, width])


def main(dataset_dir, address, out, index, count, epochs=1, secs_per_batch=0.02,
         wait_secs=60):
    out, index, count = pathlib.Path(out), int(index), int(count)
    spec = dataset_factory.get_dataset('shapes', 'train', dataset_dir)
    config = input_pipeline.InputConfig(
        batch_size=BATCH_SIZE, image_size=8, is_training=True, seed=0, num_epochs=int(epochs),
        report_skipped=True,
        data_service=data_service.ServiceConfig(address, run_name='ids-test',
                                                wait_secs=float(wait_secs)))
    input_fn = input_pipeline.make_input_fn(spec, preprocess, config)
    # As distribute_datasets_from_function calls it on worker `index` of `count`.
    dataset = input_fn(tf.distribute.InputContext(num_input_pipelines=count,
                                                  input_pipeline_id=index))
    iterator = iter(dataset)
    pathlib.Path(f'{out}.ready').touch()
    deadline = time.monotonic() + READY_WAIT_SECS
    while len(list(out.parent.glob('*.ready'))) < count:
        if time.monotonic() > deadline:
            sys.exit('the other consumers never got ready')
        time.sleep(0.1)
    ids = []
    for images, labels, _ in iterator:
        assert images.shape == (BATCH_SIZE, 8, 8, 3), images.shape
        ids += labels.numpy().tolist()
        print(f'read {len(ids)}', flush=True)
        time.sleep(float(secs_per_batch))  # every consumer takes part while the job lasts
    out.write_text(json.dumps({'ids': ids}))


if __name__ == '__main__':
    main(*sys.argv[1:])
