"""TensorBoard as a user sees it: train_image_classifier.py on shapes with default flags
(a short run, summaries after every call), then eval_image_classifier.py once; their
event files hold TF-Slim's tags, the run's flags as HParams, and the labelled confusion
matrix. One training and one evaluation serve every assertion."""
import pytest
import tensorflow as tf
from helpers import image_text
from helpers.scripts import EVAL, TRAIN, run_script
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import metadata as hparams_metadata

STEPS = 4


def _check(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _accumulator(directory):
    accumulator = event_accumulator.EventAccumulator(
        str(directory), size_guidance={event_accumulator.TENSORS: 0})
    accumulator.Reload()
    return accumulator


@pytest.fixture(scope='module')
def runs(shapes_dir, tmp_path_factory):
    """(train accumulator, eval accumulator, class names) of one short run."""
    root = tmp_path_factory.mktemp('tensorboard')
    common = ['--dataset_name=shapes', f'--dataset_dir={shapes_dir}',
              '--model_name=cifarnet']
    _check(run_script(TRAIN, *common, f'--train_dir={root / "train"}',
                      f'--max_number_of_steps={STEPS}', '--save_summaries_secs=0'))
    _check(run_script(EVAL, *common, '--dataset_split_name=validation',
                      f'--checkpoint_path={root / "train"}', f'--eval_dir={root / "eval"}'))
    names = [line.split(':', 1)[1]
             for line in (shapes_dir / 'labels.txt').read_text().splitlines() if line]
    return _accumulator(root / 'train'), _accumulator(root / 'eval'), names


def _plugins(accumulator):
    """{tag: plugin name} of every summary."""
    return {tag: accumulator.SummaryMetadata(tag).plugin_data.plugin_name
            for tag in accumulator.Tags()['tensors']}


def test_training_writes_slims_histograms_sparsity_and_images(runs):
    plugins = _plugins(runs[0])
    expected = {'total_loss': 'scalars', 'learning_rate': 'scalars',
                'losses/cross_entropy': 'scalars', 'images': 'images',
                # Weights under TF-Slim's variable names, batch-norm-free cifarnet's.
                'CifarNet/conv1/weights': 'histograms', 'CifarNet/logits/biases': 'histograms',
                'CifarNet/conv1/weights/gradient': 'histograms',
                'CifarNet/logits/biases/gradient': 'histograms',
                'CifarNet/conv1/weights/gradient_norm': 'scalars'}
    # End points as TF-Slim's cifarnet names them.
    for end_point in ('conv1', 'pool2', 'fc3', 'Logits'):
        expected[f'activations/{end_point}'] = 'histograms'
        expected[f'sparsity/{end_point}'] = 'scalars'
    assert {tag: plugins.get(tag) for tag in expected} == expected
    # Summaries after every call: the last step's, captured in the step itself.
    gradient = runs[0].Tensors('CifarNet/conv1/weights/gradient')
    assert gradient[-1].step == STEPS
    buckets = tf.make_ndarray(gradient[-1].tensor_proto)
    assert buckets.shape == (30, 3) and buckets[:, 2].sum() == 5 * 5 * 3 * 64
    sparsity = tf.make_ndarray(runs[0].Tensors('sparsity/conv1')[-1].tensor_proto)
    assert 0 < sparsity < 1  # after a relu
    # The images as the net sees them, rescaled for display: 32 x 32 from cifarnet's
    # training preprocessing, three of them.
    image = runs[0].Tensors('images')[-1].tensor_proto.string_val
    assert [int(v) for v in image[:2]] == [32, 32] and len(image) == 2 + 3


def test_training_writes_the_flags_as_hparams(runs):
    plugins = _plugins(runs[0])
    assert plugins[hparams_metadata.SESSION_START_INFO_TAG] == 'hparams'
    content = runs[0].SummaryMetadata(
        hparams_metadata.SESSION_START_INFO_TAG).plugin_data.content
    hparams = hparams_metadata.parse_session_start_info_plugin_data(content).hparams
    assert hparams['model_name'].string_value == 'cifarnet'
    assert hparams['learning_rate'].number_value == pytest.approx(0.01)  # slim's default
    assert hparams['max_number_of_steps'].number_value == STEPS
    assert hparams['dataset_name'].string_value == 'shapes'
    assert len(runs[0].Tensors(hparams_metadata.SESSION_START_INFO_TAG)) == 1


def test_evaluation_writes_the_labelled_confusion_matrix_and_the_table(runs):
    _, evaluation, names = runs
    plugins = _plugins(evaluation)
    assert {tag: plugins.get(tag) for tag in ('eval/Accuracy', 'eval/confusion_matrix',
                                              'eval/per_class')} == {
        'eval/Accuracy': 'scalars', 'eval/confusion_matrix': 'images',
        'eval/per_class': 'text'}
    stored = evaluation.Tensors('eval/confusion_matrix')[-1]
    assert stored.step == STEPS
    picture = tf.io.decode_png(stored.tensor_proto.string_val[2]).numpy()
    # Far larger than the bare matrix, and labelled with the class names.
    assert picture.shape[0] > 10 * len(names) and picture.shape[1] > 10 * len(names)
    for index, name in enumerate(names):
        assert image_text.find_text(picture, f'{index} {name}', scale=2), name
    table = evaluation.Tensors('eval/per_class')[-1].tensor_proto.string_val[0].decode()
    assert len(table.splitlines()) == 2 + len(names)
    assert all(f'| {index} | {name} |' in table for index, name in enumerate(names))
