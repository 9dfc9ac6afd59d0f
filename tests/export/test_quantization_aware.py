"""Quantization-aware training end to end, as a user runs it on `shapes`: train cifarnet
in float, fine-tune it quantization-aware, evaluate (fake quantization on), export to
int8 TFLite with --quantize, and compare the int8 model's accuracy with the float one's."""
import json

import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils
from helpers.scripts import run_script

from core.errors import UsageError
from core.naming import slim_name
from datasets import dataset_factory
from export import exporter, parity, pipeline, tflite
from nets import nets_factory, quantization
from preprocessing import preprocessing_factory

FLOAT_STEPS, QAT_STEPS = 600, 800  # QAT: 200 more steps from the float checkpoint


def _check(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _accuracy(directory):
    return json.loads((directory / 'metrics.json').read_text())['Accuracy']


@pytest.mark.slow
def test_quantization_aware_int8_model_is_as_accurate_as_the_float_one(tmp_path, shapes_dir):
    common = ['--dataset_name=shapes', f'--dataset_dir={shapes_dir}', '--model_name=cifarnet']
    # Two clones (16 each): the ranges are tracked per replica and averaged on saving.
    training = common + ['--batch_size=16', '--num_clones=2', '--clone_on_cpu',
                         '--optimizer=sgd', '--learning_rate=0.05', '--log_every_n_steps=100',
                         '--seed=1']
    float_dir, qat_dir = tmp_path / 'float', tmp_path / 'qat'
    _check(run_script('train_image_classifier.py', *training, f'--train_dir={float_dir}',
                      f'--max_number_of_steps={FLOAT_STEPS}', timeout=900))
    # As slim's fine-tuning recipe: quantization on from the first step of the new run.
    qat = _check(run_script('train_image_classifier.py', *training, f'--train_dir={qat_dir}',
                            f'--checkpoint_path={float_dir}', '--quantize_delay=0',
                            f'--max_number_of_steps={QAT_STEPS - FLOAT_STEPS}', timeout=900))
    assert 'Quantization-aware training: fake quantization from step 0' in qat.stderr

    evaluation = common + ['--dataset_split_name=validation', '--batch_size=500']
    _check(run_script('eval_image_classifier.py', *evaluation,
                      f'--checkpoint_path={float_dir}', f'--eval_dir={tmp_path / "ef"}'))
    quantized = _check(run_script('eval_image_classifier.py', *evaluation,
                                  f'--checkpoint_path={qat_dir}',
                                  f'--eval_dir={tmp_path / "eq"}'))
    assert 'fake quantization on' in quantized.stderr
    float_accuracy = _accuracy(tmp_path / 'ef')

    export_dir = tmp_path / 'export'
    exported = _check(run_script(
        'export_inference_graph.py', *common, f'--checkpoint_path={qat_dir}', '--quantize',
        f'--export_dir={export_dir}', '--export_format=tflite_int8', timeout=600))
    assert 'parity tflite_int8' in exported.stdout

    spec = dataset_factory.get_dataset('shapes', 'validation', str(shapes_dir))
    preprocess = preprocessing_factory.get_preprocessing('cifarnet')
    examples = parity.load_examples(spec.num_samples, (32, 32, 3), spec=spec,
                                    preprocess=lambda image: preprocess(image, 32, 32))
    labels = np.array([int(spec.parse(record)['label'])
                       for record in tf.data.TFRecordDataset(spec.list_files())])
    logits = tflite.Runner(str(export_dir / 'model_int8.tflite'))(examples.images)['logits']
    int8_accuracy = float(np.mean(logits.argmax(-1) == labels))
    print(f'float {float_accuracy:.4f}, QAT (fake-quantized) {_accuracy(tmp_path / "eq"):.4f}'
          f', int8 TFLite {int8_accuracy:.4f}')
    assert float_accuracy > 0.9  # a trained model, else the comparison says nothing
    assert int8_accuracy >= float_accuracy - 0.02
    assert abs(_accuracy(tmp_path / 'eq') - int8_accuracy) <= 0.02


def test_every_format_of_a_quantization_aware_net_passes_its_parity_check(tmp_path):
    net = nets_factory.get_network_fn('cifarnet', 10,
                                      quantization=quantization.QuantizationParams())
    net.build((32, 32, 3))
    preprocess_image = preprocessing_factory.get_preprocessing('cifarnet')
    preprocess = lambda image: preprocess_image(image, 32, 32)  # noqa: E731
    examples = parity.load_examples(32, (32, 32, 3), preprocess=preprocess)
    net(examples.images, training=True)  # learns the ranges
    formats = ('saved_model', 'frozen_graph', 'tflite', 'tflite_int8')
    lines = []
    results = pipeline.export(
        net, exporter.ServingInfo((32, 32, 3), preprocess=preprocess),
        pipeline.ExportRequest(pipeline.resolve_targets(formats, export_dir=str(tmp_path))),
        examples, calibration=lambda: examples.images, log=lines.append)
    by_name = {result.name: result for result in results}
    # TensorFlow runs the same fake-quantization kernels: exact.
    assert by_name['saved_model/serving_bytes'].max_abs_diff == 0
    assert by_name['frozen_graph'].max_abs_diff == 0
    # TFLite's float model quantizes and dequantizes in its own kernels: judged by agreement.
    assert by_name['tflite'].min_agreement == by_name['tflite_int8'].min_agreement == 0.95
    assert all(result.ok for result in results), lines
    frozen = exporter.read_graph_def(str(tmp_path / 'frozen_graph.pb'))
    assert {'FakeQuantWithMinMaxVars', 'FakeQuantWithMinMaxVarsPerChannel'} <= {
        node.op for node in frozen.node}


def test_evaluation_and_export_quantize_when_the_checkpoint_is_quantization_aware(tmp_path):
    from cli import assembly  # pylint: disable=import-outside-toplevel
    trained = nets_factory.get_network_fn('cifarnet', 10,
                                          quantization=quantization.QuantizationParams())
    trained.build((32, 32, 3))
    tf.train.Checkpoint(model=trained).save(str(tmp_path / 'qat' / 'model.ckpt'))
    tf.train.Checkpoint(model=testing_utils.built_cifarnet()).save(
        str(tmp_path / 'float' / 'model.ckpt'))
    (tmp_path / 'empty').mkdir()

    def quantized(checkpoint_dir, quantize):
        return assembly.quantization_of(str(tmp_path / checkpoint_dir), quantize) is not None

    assert quantized('qat', quantize=False) and quantized('qat', quantize=True)
    assert not quantized('float', quantize=False)
    # Continuous evaluation before the first checkpoint: --quantize, or the run's flags.
    assert quantized('empty', quantize=True) and not quantized('empty', quantize=False)
    (tmp_path / 'empty' / 'flags.txt').write_text('--model_name=cifarnet\n--quantize_delay=0\n')
    assert quantized('empty', quantize=False)
    with pytest.raises(UsageError, match='holds no quantization ranges.*--quantize_delay'):
        quantized('float', quantize=True)


@pytest.mark.parametrize('model_name', [
    'mobilenet_v1', pytest.param('mobilenet_v2', marks=pytest.mark.slow)])
def test_depthwise_and_residual_nets_convert_to_int8_on_their_ranges(model_name):
    net = nets_factory.get_network_fn(model_name, 10,
                                      quantization=quantization.QuantizationParams())
    net.build((64, 64, 3))
    for variable in net.variables:  # fresh batch norms would leave every logit at 0
        if not quantization.is_range(slim_name(variable)):
            variable.assign(testing_utils.golden_weight_value(slim_name(variable),
                                                              variable.shape))
    images = np.random.default_rng(0).uniform(-1, 1, (32, 64, 64, 3)).astype(np.float32)
    net(images, training=True)  # learns the ranges
    model = tflite.convert(net, exporter.ServingInfo((64, 64, 3)), int8=True,
                           representative_images=images)
    runner = tflite.Interpreter(model_content=model).get_signature_runner(tflite.SIGNATURE)
    scale, _ = runner.get_input_details()[tflite.INPUT_NAME]['quantization']
    learned = net.input_quantizer
    assert scale == pytest.approx((learned.max.numpy() - learned.min.numpy()) / 255, rel=1e-5)
    result = parity.compare(model_name, _run_tflite(model, images),
                            parity.reference_logits(net, images), min_agreement=0.9)
    print(result.line())
    assert result.ok, result.line()


def _run_tflite(model, images):
    import tempfile  # pylint: disable=import-outside-toplevel
    with tempfile.NamedTemporaryFile(suffix='.tflite') as f:
        f.write(model)
        f.flush()
        return tflite.Runner(f.name)(images)['logits']
