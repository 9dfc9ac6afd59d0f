"""Training with --augmentation and --random_erase_prob, as a user types it: it runs,
records the flags, and two runs with --seed --deterministic end bit-identical."""
import concurrent.futures

import numpy as np
import tensorflow as tf
from helpers import testing_utils
from helpers.scripts import TRAIN, run_script


def test_randaugment_training_runs_and_repeats_bit_for_bit(tmp_path):
    data = tmp_path / 'shapes'
    testing_utils.write_small_shapes(str(data), num_train=16, num_validation=4)
    common = ['--dataset_name=shapes', f'--dataset_dir={data}', '--model_name=cifarnet',
              '--batch_size=4', '--max_number_of_steps=2', '--seed=5', '--deterministic',
              '--augmentation=randaugment', '--randaugment_magnitude=9',
              '--random_erase_prob=0.5']
    runs = [tmp_path / 'a', tmp_path / 'b']
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(
            lambda train_dir: run_script(TRAIN, *common, f'--train_dir={train_dir}',
                                         timeout=120), runs))
    for result in results:
        assert result.returncode == 0 and 'Traceback' not in result.stderr, (
            result.stderr[-3000:])
    flags_text = (runs[0] / 'flags.txt').read_text()
    assert '--augmentation=randaugment' in flags_text
    assert '--randaugment_magnitude=9.0' in flags_text
    first, second = (tf.train.load_checkpoint(tf.train.latest_checkpoint(str(run)))
                     for run in runs)
    assert first.get_tensor('global_step/.ATTRIBUTES/VARIABLE_VALUE') == 2
    names = [name for name in first.get_variable_to_shape_map()
             if name.startswith(('model/', 'optimizer/'))]
    assert any('weights' in name for name in names)
    for name in names:
        np.testing.assert_array_equal(first.get_tensor(name), second.get_tensor(name),
                                      err_msg=name)
