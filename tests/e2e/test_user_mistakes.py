"""User mistakes through the real scripts: each ends in its one `ERROR:` line naming the
fix (exit status 1), never a traceback.

Each script's cases run in one process (tests/helpers/run_script_cases.py: absl parses the
flags, main runs under cli.guard, TensorFlow is imported once). Training runs first:
its first case trains a checkpoint the later cases (resume with other settings,
evaluate, export) do not fit.
"""
import concurrent.futures
import json
import os
import subprocess
import sys

import pytest
from helpers import testing_utils

ROOT = testing_utils.TEST_DATA.parent.parent
TRAIN = 'train_image_classifier.py'
EVAL = 'eval_image_classifier.py'
EXPORT = 'export_inference_graph.py'

DATA = ['--dataset_name=shapes', '--dataset_dir={shapes}', '--model_name=lenet']
TRAIN_ARGS = DATA + ['--batch_size=4', '--max_number_of_steps=1', '--train_dir={work}/new']
RESUME = [a for a in TRAIN_ARGS if not a.startswith('--train_dir')] + [
    '--train_dir={work}/trained', '--max_number_of_steps=2']
EVAL_ARGS = DATA + ['--dataset_split_name=validation', '--checkpoint_path={work}/trained',
                    '--eval_dir={work}/eval']
EXPORT_ARGS = ['--model_name=lenet', '--dataset_name=shapes',
               '--checkpoint_path={work}/trained', '--num_parity_examples=2']

# name -> (script, args, phrases of the ERROR line). Order matters within a script.
CASES = {
    # A good run first: the checkpoint the mismatch cases below resume or read.
    # ... with slim's --master='' as slim's scripts pass it: accepted, noted, ignored.
    'train/trains_a_checkpoint': (TRAIN, RESUME[:-1] + ['--max_number_of_steps=1',
                                                        '--master='], None),
    # Item 1: ranges, 0 is not "the default".
    'train/batch_size_0': (TRAIN, TRAIN_ARGS + ['--batch_size=0'], ['--batch_size=0']),
    'train/batch_size_negative': (TRAIN, TRAIN_ARGS + ['--batch_size=-3'],
                                  ['--batch_size=-3', 'at least 1']),
    'train/train_image_size_0': (TRAIN, TRAIN_ARGS + ['--train_image_size=0'],
                                 ['--train_image_size=0', 'unset']),
    'train/num_readers_0': (TRAIN, TRAIN_ARGS + ['--num_readers=0'],
                            ['--num_readers=0', 'AUTOTUNE']),
    'train/num_preprocessing_threads_0': (TRAIN, TRAIN_ARGS + ['--num_preprocessing_threads=0'],
                                          ['--num_preprocessing_threads=0']),
    'train/shuffle_buffer_size_0': (TRAIN, TRAIN_ARGS + ['--shuffle_buffer_size=0'],
                                    ['--shuffle_buffer_size=0']),
    'train/labels_offset_negative': (TRAIN, TRAIN_ARGS + ['--labels_offset=-1'],
                                     ['--labels_offset=-1']),
    'train/labels_offset_too_large': (TRAIN, TRAIN_ARGS + ['--labels_offset=10'],
                                      ['--labels_offset=10', 'no classes']),
    'train/train_image_size_too_small': (TRAIN, TRAIN_ARGS + ['--train_image_size=2'],
                                         ['too small for this network',
                                          '--train_image_size']),
    'train/deterministic_without_seed': (TRAIN, TRAIN_ARGS + ['--deterministic'],
                                         ['--deterministic needs --seed']),
    'train/max_checkpoints_to_keep_0': (TRAIN, TRAIN_ARGS + ['--max_checkpoints_to_keep=0'],
                                        ['--max_checkpoints_to_keep=0']),
    'train/log_every_n_steps_0': (TRAIN, TRAIN_ARGS + ['--log_every_n_steps=0'],
                                  ['--log_every_n_steps']),
    'train/max_number_of_steps_0': (TRAIN, TRAIN_ARGS + ['--max_number_of_steps=0'],
                                    ['--max_number_of_steps']),
    'train/save_interval_secs_negative': (TRAIN, TRAIN_ARGS + ['--save_interval_secs=-1'],
                                          ['--save_interval_secs=-1']),
    'train/save_summaries_secs_negative': (TRAIN, TRAIN_ARGS + ['--save_summaries_secs=-5'],
                                           ['--save_summaries_secs=-5']),
    'train/label_smoothing': (TRAIN, TRAIN_ARGS + ['--label_smoothing=1.5'],
                              ['--label_smoothing']),
    'train/moving_average_decay': (TRAIN, TRAIN_ARGS + ['--moving_average_decay=1.5'],
                                   ['--moving_average_decay']),
    'train/weight_decay_negative': (TRAIN, TRAIN_ARGS + ['--weight_decay=-1'],
                                    ['--weight_decay=-1']),
    'train/learning_rate_negative': (TRAIN, TRAIN_ARGS + ['--learning_rate=-0.1'],
                                     ['--learning_rate=-0.1']),
    'train/end_learning_rate_negative': (TRAIN, TRAIN_ARGS + ['--end_learning_rate=-1'],
                                         ['--end_learning_rate=-1']),
    'train/decay_factor_0': (TRAIN, TRAIN_ARGS + ['--learning_rate_decay_factor=0'],
                             ['--learning_rate_decay_factor=0']),
    # GPU-host flags (docs/performance.md, "GPU") where they cannot work.
    'train/all_reduce_alg_on_one_device': (TRAIN, TRAIN_ARGS + ['--all_reduce_alg=ring'],
                                           ['--all_reduce_alg=ring', 'drop it']),
    'train/nccl_without_gpus': (TRAIN, TRAIN_ARGS + ['--strategy=multi_worker',
                                                     '--all_reduce_alg=nccl'],
                                ['--all_reduce_alg=nccl needs GPUs', 'leave it unset']),
    'train/gpu_thread_count_without_mode': (TRAIN, TRAIN_ARGS + ['--gpu_thread_count=4'],
                                            ['--gpu_thread_count', '--gpu_thread_mode']),
    'train/num_epochs_per_decay_0': (TRAIN, TRAIN_ARGS + ['--num_epochs_per_decay=0'],
                                     ['--num_epochs_per_decay=0']),
    'train/warmup_epochs_negative': (TRAIN, TRAIN_ARGS + ['--warmup_epochs=-1'],
                                     ['--warmup_epochs']),
    'train/decay_type_unknown': (TRAIN, TRAIN_ARGS + ['--learning_rate_decay_type=step'],
                                 ['step', 'cosine']),
    'train/adam_beta1': (TRAIN, TRAIN_ARGS + ['--adam_beta1=1.5'], ['--adam_beta1=1.5']),
    'train/momentum_negative': (TRAIN, TRAIN_ARGS + ['--momentum=-0.5'], ['--momentum=-0.5']),
    'train/rmsprop_decay': (TRAIN, TRAIN_ARGS + ['--rmsprop_decay=2'], ['--rmsprop_decay=2']),
    'train/opt_epsilon_negative': (TRAIN, TRAIN_ARGS + ['--opt_epsilon=-1'],
                                   ['--opt_epsilon=-1']),
    'train/clip_gradient_norm_negative': (TRAIN, TRAIN_ARGS + ['--clip_gradient_norm=-1'],
                                          ['--clip_gradient_norm']),
    'train/optimizer_flag_of_another': (TRAIN, TRAIN_ARGS + ['--optimizer=adam',
                                                             '--adamw_weight_decay=0.05'],
                                        ['--adamw_weight_decay', 'pass --optimizer=adamw']),
    'train/weight_decay_exclude_unknown': (
        TRAIN, TRAIN_ARGS + ['--optimizer=adamw', '--weight_decay_exclude=bias'],
        ['--weight_decay_exclude=bias names bias', 'norms, biases']),
    'train/weight_decay_exclude_unmatched': (  # lenet has no norm layers
        TRAIN, TRAIN_ARGS + ['--optimizer=adamw', '--weight_decay_exclude=biases,norms'],
        ['names norms, which match no trained variable']),
    'train/num_clones_0': (TRAIN, TRAIN_ARGS + ['--num_clones=0'], ['--num_clones']),
    'train/replicas_to_aggregate_0': (TRAIN, TRAIN_ARGS + ['--replicas_to_aggregate=0'],
                                      ['--replicas_to_aggregate']),
    'train/unknown_optimizer': (TRAIN, TRAIN_ARGS + ['--optimizer=adamw2'], ['adamw2', 'sgd']),
    'train/unknown_model': (TRAIN, TRAIN_ARGS + ['--model_name=resnet_v9'], ['resnet_v9']),
    'train/stray_argument': (TRAIN, TRAIN_ARGS + ['oops'], ['Unexpected arguments oops']),
    'train/scopes_with_spaces': (TRAIN, TRAIN_ARGS + ['--trainable_scopes=LeNet/fc4, LeNet/fc3'],
                                 ['has spaces', '--trainable_scopes=LeNet/fc4,LeNet/fc3']),
    'train/trainable_scopes_unmatched': (TRAIN, TRAIN_ARGS + ['--trainable_scopes=Nope'],
                                         ['--trainable_scopes=Nope', 'matches no variable']),
    'train/dry_run_restore_alone': (TRAIN, TRAIN_ARGS + ['--dry_run_restore'],
                                    ['--dry_run_restore needs --checkpoint_path']),
    # Item 1: paths, before TensorFlow work.
    'train/train_dir_is_a_file': (TRAIN, TRAIN_ARGS + ['--train_dir={file}'],
                                  ['--train_dir=', 'is a file']),
    'train/train_dir_under_a_file': (TRAIN, TRAIN_ARGS + ['--train_dir={file}/sub'],
                                     ['--train_dir=', 'cannot be created']),
    'train/dataset_dir_missing': (TRAIN, TRAIN_ARGS + ['--dataset_dir={work}/nowhere'],
                                  ['--dataset_dir=', 'does not exist',
                                   'download_and_convert_data.py']),
    'train/dataset_dir_is_a_file': (TRAIN, TRAIN_ARGS + ['--dataset_dir={file}'],
                                    ['--dataset_dir=', 'is a file']),
    # Item 2: a --train_dir whose checkpoint does not fit the run.
    'train/resume_other_model': (TRAIN, RESUME + ['--model_name=cifarnet'],
                                 ['--model_name', '--train_dir']),
    'train/resume_other_optimizer': (TRAIN, RESUME + ['--optimizer=sgd'],
                                     ['--optimizer=rmsprop', '--train_dir']),
    'train/resume_with_adamw': (TRAIN, RESUME + ['--optimizer=adamw'],
                                ['--optimizer=rmsprop', '--train_dir']),
    'train/resume_with_moving_averages': (TRAIN, RESUME + ['--moving_average_decay=0.99'],
                                          ['drop --moving_average_decay', '--train_dir']),
    'train/resume_grayscale': (TRAIN, RESUME + ['--use_grayscale'],
                               ['channel', '--use_grayscale', '--train_dir']),
    'train/resume_other_classes': (TRAIN, RESUME + ['--labels_offset=1'],
                                   ['10 classes', '--labels_offset', '--train_dir']),
    # Item 3: data that stops a job (training saves a checkpoint first).
    'train/label_out_of_range': (TRAIN, TRAIN_ARGS + ['--dataset_dir={bad_labels}',
                                                      '--train_dir={work}/bad_labels'],
                                 ['Label 10 of record', 'bad_labels/shapes_', '[0, 10)']),
    'train/labels_offset_makes_labels_negative': (
        TRAIN, TRAIN_ARGS + ['--labels_offset=9', '--train_dir={work}/offset9'],
        ['Label -', 'outside [0, 1) after --labels_offset=9']),  # labels 0..7 here
    'train/no_examples': (TRAIN, TRAIN_ARGS + ['--dataset_dir={empty_shards}'],
                          ['No examples in the 2 file(s)', 'download_and_convert_data.py']),
    # A dataset_dir holding another dataset: its dataset_info.json or labels.txt says so.
    'train/image_folder_without_dataset_name': (
        TRAIN, ['--dataset_dir={photos}', '--model_name=lenet', '--batch_size=4',
                '--max_number_of_steps=1', '--train_dir={work}/photos_train'],
        ['holds the image_folder dataset', 'not imagenet', '--dataset_name=image_folder']),
    'train/labels_of_another_dataset': (
        TRAIN, [a.replace('=shapes', '=flowers') for a in TRAIN_ARGS],
        ['labels.txt names 10 classes (ids 0 to 9), but flowers has 5', '--dataset_name']),
    # Flags absl cannot parse: one ERROR line, the closest names (cli.guard.parse_flags).
    'train/misspelt_flag': (TRAIN, TRAIN_ARGS + ['--learing_rate=0.1'],
                            ['Unknown flag --learing_rate; did you mean --learning_rate?']),
    'train/unknown_flag': (TRAIN, TRAIN_ARGS + ['--frobnicate=3'],
                           ['Unknown flag --frobnicate', '--help lists']),
    'train/flag_value_of_another_type': (TRAIN, TRAIN_ARGS + ['--batch_size=four'],
                                         ['--batch_size', 'four']),
    # Evaluation.
    'eval/image_folder_without_dataset_name': (
        EVAL, ['--dataset_dir={photos}', '--model_name=lenet',
               '--checkpoint_path={work}/trained', '--eval_dir={work}/eval_photos'],
        ['holds the image_folder dataset', '--dataset_name=image_folder']),
    'eval/misspelt_flag': (EVAL, EVAL_ARGS + ['--checkpoint_pth={work}/trained'],
                           ['Unknown flag --checkpoint_pth; did you mean --checkpoint_path']),
    'eval/batch_size_negative': (EVAL, EVAL_ARGS + ['--batch_size=-3'], ['--batch_size=-3']),
    'eval/batch_size_0': (EVAL, EVAL_ARGS + ['--batch_size=0'], ['--batch_size=0']),
    'eval/eval_image_size_0': (EVAL, EVAL_ARGS + ['--eval_image_size=0'],
                               ['--eval_image_size=0']),
    'eval/max_num_batches_0': (EVAL, EVAL_ARGS + ['--max_num_batches=0'],
                               ['--max_num_batches=0']),
    'eval/eval_dir_is_a_file': (EVAL, EVAL_ARGS + ['--eval_dir={file}'],
                                ['--eval_dir=', 'is a file']),
    'eval/no_checkpoint_in_dir': (EVAL, EVAL_ARGS + ['--checkpoint_path={work}'],
                                  ['No checkpoint found']),
    'eval/checkpoint_prefix_missing': (EVAL, EVAL_ARGS + ['--checkpoint_path={work}/x.ckpt'],
                                       ['does not exist']),
    'eval/other_model': (EVAL, EVAL_ARGS + ['--model_name=cifarnet'], ['--model_name']),
    'eval/grayscale': (EVAL, EVAL_ARGS + ['--use_grayscale'], ['channel', '--use_grayscale']),
    'eval/other_classes': (EVAL, EVAL_ARGS + ['--labels_offset=1'],
                           ['10 classes', '--labels_offset=0']),
    'eval/moving_averages_absent': (EVAL, EVAL_ARGS + ['--moving_average_decay=0.9'],
                                    ['moving averages', '--moving_average_decay']),
    'eval/nccl_with_cpu_clones': (EVAL, EVAL_ARGS + ['--num_clones=2', '--clone_on_cpu',
                                                     '--all_reduce_alg=nccl'],
                                  ['--all_reduce_alg=nccl runs on GPUs', '--clone_on_cpu']),
    'eval/label_out_of_range': (EVAL, EVAL_ARGS + ['--dataset_dir={bad_labels}'],
                                ['Label 10 of record', 'bad_labels/shapes_validation']),
    'eval/malformed_labels_txt': (EVAL, EVAL_ARGS + ['--dataset_dir={bad_labels_txt}'],
                                  ['labels.txt line 2', "'label:name'"]),
    # Export.
    'export/num_parity_examples_0': (EXPORT, EXPORT_ARGS + ['--num_parity_examples=0',
                                                           '--export_dir={work}/e1'],
                                     ['--num_parity_examples=0']),
    'export/image_size_0': (EXPORT, EXPORT_ARGS + ['--image_size=0', '--export_dir={work}/e2'],
                            ['--image_size=0']),
    'export/parity_tolerance_negative': (EXPORT, EXPORT_ARGS + ['--parity_tolerance=-1',
                                                               '--export_dir={work}/e3'],
                                         ['--parity_tolerance=-1']),
    'export/saved_model_dir_is_a_file': (EXPORT, EXPORT_ARGS + ['--saved_model_dir={file}'],
                                         ['--saved_model_dir=', 'is a file']),
    'export/into_a_non_empty_dir': (EXPORT, EXPORT_ARGS + ['--saved_model_dir={full}'],
                                    ['already exist', '--overwrite']),
    'export/other_classes': (EXPORT, EXPORT_ARGS + ['--labels_offset=1',
                                                    '--export_dir={work}/e4'],
                             ['10 classes', '--labels_offset=0']),
    'export/image_folder_without_dataset_name': (
        EXPORT, ['--model_name=lenet', '--dataset_dir={photos}',
                 '--checkpoint_path={work}/trained', '--export_dir={work}/e6'],
        ['holds the image_folder dataset', '--dataset_name=image_folder']),
    # Frozen fresh weights would pass for a model: TF-Slim's unfrozen graph is the way.
    'export/frozen_without_checkpoint': (EXPORT, [a for a in EXPORT_ARGS if 'checkpoint'
                                                  not in a] + ['--export_dir={work}/e5',
                                                               '--export_format=frozen_graph'],
                                         ['frozen_graph would hold freshly initialised',
                                          '--checkpoint_path', '--export_format=graphdef']),
}


def _run_cases(script, cases, work):
    cases_file = work / f'{script}.json'
    cases_file.write_text(json.dumps(cases))
    env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
    env['PYTHONPATH'] = str(ROOT)
    result = subprocess.run(
        [sys.executable, str(ROOT / 'tests' / 'helpers' / 'run_script_cases.py'), script,
         str(cases_file)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    outputs, name, lines = {}, None, []
    for line in result.stderr.splitlines():
        if line.startswith('@@CASE '):
            name, lines = line.split(' ', 1)[1], []
        elif line.startswith('@@STATUS '):
            outputs[name] = (int(line.rsplit(' ', 1)[1]), '\n'.join(lines))
            name = None
        elif name is not None:
            lines.append(line)
    return outputs, result


@pytest.fixture(scope='module')
def outcomes(tmp_path_factory):
    """case name -> (exit status, stderr of the case)."""
    work = tmp_path_factory.mktemp('mistakes')
    shapes = work / 'shapes'
    testing_utils.write_small_shapes(str(shapes), num_train=8, num_validation=4)
    (work / 'a_file').write_text('not a directory')
    (work / 'full').mkdir()
    (work / 'full' / 'keep.txt').write_text('an earlier export')
    bad_labels = work / 'bad_labels'  # every label is 10, of 10 classes
    testing_utils.write_small_shapes(str(bad_labels), num_train=8, num_validation=4)
    for path in bad_labels.glob('*.tfrecord'):
        _relabel(path, 10)
    empty_shards = work / 'empty_shards'
    testing_utils.write_small_shapes(str(empty_shards), num_train=8, num_validation=4)
    for path in empty_shards.glob('*.tfrecord'):
        path.write_bytes(b'')
    bad_labels_txt = work / 'bad_labels_txt'
    testing_utils.write_small_shapes(str(bad_labels_txt), num_train=8, num_validation=4)
    (bad_labels_txt / 'labels.txt').write_text('0:circle\nsquare\n')
    photos = work / 'photos'
    _convert_photo_folder(work / 'my_photos', photos)
    values = dict(work=work, shapes=shapes, file=work / 'a_file', full=work / 'full',
                  bad_labels=bad_labels, empty_shards=empty_shards,
                  bad_labels_txt=bad_labels_txt, photos=photos)
    by_script = {}
    for name, (script, args, _) in CASES.items():
        by_script.setdefault(script, []).append(
            [name, [a.format(**values) for a in args]])
    outcomes, raw = _run_cases(TRAIN, by_script.pop(TRAIN), work)
    assert 'train/trains_a_checkpoint' in outcomes, raw.stderr[-3000:]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(_run_cases, script, cases, work)
                   for script, cases in by_script.items()]
        for future in futures:
            outputs, raw = future.result()
            outcomes.update(outputs)
            outcomes.setdefault('__raw__', []).append(raw.stderr[-3000:])
    outcomes['__work__'] = work
    return outcomes


def _convert_photo_folder(source, destination):
    """An image_folder conversion of 3 classes of 2 photos, as the README's tour makes."""
    from datasets import dataset_factory, dataset_utils  # pylint: disable=import-outside-toplevel
    for label, name in enumerate(('forest', 'sea', 'sunset')):
        (source / name).mkdir(parents=True)
        for index in range(2):
            (source / name / f'{index}.jpg').write_bytes(
                testing_utils.encoded_image(20, 24, seed=10 * label + index))
    dataset_factory.download_and_convert('image_folder', str(destination),
                                         options=dataset_utils.ConvertOptions(
                                             source_dir=str(source),
                                             validation_percentage=50))


def _relabel(path, label):
    """Rewrites a shard with every record's label set to `label`."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(
        str(path))]
    for record in records:
        record.features.feature['image/class/label'].int64_list.value[:] = [label]
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record.SerializeToString())


def test_training_saves_a_checkpoint_before_stopping_on_bad_data(outcomes):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    assert outcomes['train/label_out_of_range'][0] == 1
    assert tf.train.latest_checkpoint(str(outcomes['__work__'] / 'bad_labels'))


def test_the_table_holds_at_least_40_mistakes():
    assert sum(1 for _, _, phrases in CASES.values() if phrases) >= 40


@pytest.mark.parametrize('name', [n for n, (_, _, p) in CASES.items() if p])
def test_mistake_ends_in_one_line(name, outcomes):
    assert name in outcomes, outcomes.get('__raw__')
    status, stderr = outcomes[name]
    assert 'Traceback' not in stderr, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith('ERROR:')]
    assert status == 1 and len(errors) == 1, stderr[-3000:]
    for phrase in CASES[name][2]:
        assert phrase in errors[0], errors[0]
    assert '--num_classes' not in errors[0]  # no such flag


def test_the_good_run_trained(outcomes):
    status, stderr = outcomes['train/trains_a_checkpoint']
    assert status == 0, stderr[-3000:]
