"""Every export format of lenet, cifarnet and mobilenet_v1, written by the pipeline
(parity check included) and reloaded here, each checked on its own against the model
on `shapes` images."""
import base64
import json

import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils

from core.naming import slim_name
from datasets import dataset_factory, shapes
from export import exporter, parity, pipeline, saved_model_parity
from nets import nets_factory
from preprocessing import preprocessing_factory

NUM_EXAMPLES = 64


@pytest.fixture(scope='module')
def shapes_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp('shapes')
    testing_utils.write_small_shapes(str(directory), num_train=NUM_EXAMPLES,
                                     num_validation=NUM_EXAMPLES)
    return directory


def _golden_network(model_name, image_size):
    """The net with slim_reference's deterministic weights (logits spread, unlike a
    fresh mobilenet's, whose batch norms leave them all near zero)."""
    net = nets_factory.get_network_fn(model_name, 10)
    net.build((image_size, image_size, 3))
    for variable in net.variables:
        variable.assign(testing_utils.golden_weight_value(slim_name(variable),
                                                          variable.shape))
    return net


def _export(model_name, image_size, directory, shapes_dir, formats=pipeline.FORMATS):
    net = _golden_network(model_name, image_size)
    preprocess_image = preprocessing_factory.get_preprocessing(net.spec.preprocessing_name)
    preprocess = lambda image: preprocess_image(image, image_size, image_size)  # noqa: E731
    input_shape = (image_size, image_size, 3)
    serving = exporter.ServingInfo(input_shape, class_names=shapes.INFO.labels_to_names(),
                                   preprocess=preprocess)

    def examples(split):
        return parity.load_examples(
            NUM_EXAMPLES, input_shape, preprocess=preprocess,
            spec=dataset_factory.get_dataset('shapes', split, str(shapes_dir)))

    validation = examples('validation')
    targets = pipeline.resolve_targets(formats, export_dir=str(directory))
    lines = []
    results = pipeline.export(net, serving, pipeline.ExportRequest(
        targets, labels_dir=str(directory)), validation,
        calibration=lambda: examples('train').images, log=lines.append)
    return dict(net=net, targets=targets, examples=validation, results=results,
                lines=lines, expected=net(validation.images, training=False)[0].numpy(),
                directory=directory)


@pytest.fixture(scope='module', params=['lenet', 'cifarnet'])
def exported(request, shapes_dir, tmp_path_factory):
    size = nets_factory.get_spec(request.param).default_image_size
    return _export(request.param, size, tmp_path_factory.mktemp(request.param), shapes_dir)


def _relative_difference(logits, expected):
    return np.abs(logits - expected).max() / np.abs(expected).max()


def _run_tflite(path, images):
    """A TFLite model as an app runs it (README "Export and deploy")."""
    from ai_edge_litert.interpreter import Interpreter
    runner = Interpreter(model_path=path).get_signature_runner('serving_default')
    inputs, outputs = runner.get_input_details()['input'], runner.get_output_details()
    logits = []
    for image in images:
        batch = image[None]
        if inputs['dtype'] == np.uint8:  # int8 model: quantize the preprocessed image
            scale, zero_point = inputs['quantization']
            batch = np.clip(np.round(batch / scale + zero_point), 0, 255).astype(np.uint8)
        raw = runner(input=batch)['logits']
        scale, zero_point = outputs['logits']['quantization']
        logits.append((raw.astype(np.float32) - zero_point) * scale if scale else raw)
    return np.concatenate(logits)


def _rest_predict(loaded, body: str) -> dict:
    """What TF Serving's REST predict does with a body in the "instances" (row) format:
    {"b64": ...} values decoded to bytes, the rows batched into the signature's one
    input, the outputs split back into rows."""
    request = json.loads(body)
    signature = loaded.signatures[request.get('signature_name', 'serving_default')]
    ((input_name, spec),) = signature.structured_input_signature[1].items()
    rows = [base64.b64decode(row['b64']) if isinstance(row, dict) else row
            for row in request['instances']]
    outputs = {name: value.numpy() for name, value in  # numbers as the input's type
               signature(**{input_name: tf.constant(rows, spec.dtype)}).items()}
    def to_json(value):  # strings come back as text (their names do not end in _bytes)
        return value.decode() if isinstance(value, bytes) else value.tolist()

    return {'predictions': [{name: to_json(value[i]) for name, value in outputs.items()}
                            for i in range(len(rows))]}


def test_every_format_passes_its_parity_check_and_reports_it(exported):
    assert list(exported['targets']) == list(pipeline.FORMATS)
    names = [result.name for result in exported['results']]
    assert names == ['saved_model/serving_default', 'saved_model/serving_bytes',
                     'saved_model/serving_tf_example', 'saved_model/serving_preprocessed',
                     'graphdef', 'frozen_graph', 'tflite', 'tflite_int8', 'slim_checkpoint']
    assert exported['lines'][0] == f'Parity check on {NUM_EXAMPLES} images of shapes/validation.'
    assert all(line.endswith(': ok') for line in exported['lines'][1:]
               if 'logit diff' in line)
    assert not list(exported['directory'].glob('*.partial'))
    labels = (exported['directory'] / 'labels.txt').read_text().splitlines()
    assert labels[:2] == ['0:circle', '1:square']


def test_saved_model_matches_the_model(exported):
    serve = tf.saved_model.load(exported['targets']['saved_model']).signatures[
        'serving_preprocessed']
    logits = serve(images=tf.constant(exported['examples'].images))['logits'].numpy()
    np.testing.assert_allclose(logits, exported['expected'], rtol=1e-5,
                               atol=1e-5 * np.abs(exported['expected']).max())


def test_frozen_graph_matches_the_model(exported):
    run = exporter.graph_def_function(
        exporter.read_graph_def(exported['targets']['frozen_graph']))
    logits = run(tf.constant(exported['examples'].images))[0].numpy()
    np.testing.assert_allclose(logits, exported['expected'], rtol=1e-5,
                               atol=1e-5 * np.abs(exported['expected']).max())


def test_graphdef_is_the_unfrozen_inference_graph(exported):
    graph_def = exporter.read_graph_def(exported['targets']['graphdef'])
    ops = {node.name: node.op for node in graph_def.node}
    assert ops['input'] == 'Placeholder'
    assert {'logits', 'probabilities', 'classes', 'class_names'} <= set(ops)
    assert 'VariableV2' in ops.values()  # weights are not folded in: TF-Slim's variables


def test_tflite_float_matches_the_model(exported):
    logits = _run_tflite(exported['targets']['tflite'], exported['examples'].images)
    assert _relative_difference(logits, exported['expected']) <= 1e-4


def test_tflite_int8_agrees_with_the_float_model_on_shapes(exported):
    logits = _run_tflite(exported['targets']['tflite_int8'], exported['examples'].images)
    agreement = np.mean(logits.argmax(-1) == exported['expected'].argmax(-1))
    assert agreement >= 0.95


@pytest.mark.parametrize('signature', ['serving_default', 'serving_bytes',
                                       'serving_tf_example'])
def test_image_signatures_as_tf_serving_calls_them(exported, signature):
    """The REST bodies of docs/export.md: uint8 arrays, {"b64": image file}, {"b64":
    serialized tf.Example}."""
    loaded = tf.saved_model.load(exported['targets']['saved_model'])
    encoded = exported['examples'].encoded[:6]
    jpegs = [tf.io.encode_jpeg(tf.io.decode_png(e), quality=95).numpy() for e in encoded[:3]]
    files = jpegs + encoded[3:]
    instances = {
        'serving_default': [tf.io.decode_image(e, channels=3).numpy().tolist()
                            for e in files],
        'serving_bytes': [{'b64': base64.b64encode(e).decode()} for e in files],
        'serving_tf_example': [
            {'b64': base64.b64encode(saved_model_parity.tf_example(e)).decode()}
            for e in files]}[signature]
    body = json.dumps({'signature_name': signature, 'instances': instances})
    predictions = _rest_predict(loaded, body)['predictions']
    assert sorted(predictions[0]) == ['class_names', 'classes', 'logits', 'probabilities']
    # The same classes as preprocessing here, then the float signature.
    net = exported['net']
    preprocess = preprocessing_factory.get_preprocessing(net.spec.preprocessing_name)
    size = net.default_image_size
    images = tf.stack([preprocess(tf.io.decode_image(e, channels=3), size, size)
                       for e in files])
    served = loaded.signatures['serving_preprocessed'](images=images)
    assert [p['classes'] for p in predictions] == served['classes'].numpy().tolist()
    np.testing.assert_allclose([p['logits'] for p in predictions], served['logits'].numpy(),
                               rtol=1e-5, atol=1e-5 * np.abs(served['logits'].numpy()).max())
    names = shapes.INFO.class_names
    assert [p['class_names'] for p in predictions] == [names[p['classes']]
                                                       for p in predictions]


@pytest.mark.slow
def test_mobilenet_v1_at_a_small_input_size_exports_to_every_format(shapes_dir, tmp_path):
    exported = _export('mobilenet_v1', 64, tmp_path, shapes_dir)
    expected = exported['expected']
    assert all(result.ok for result in exported['results'])
    serve = tf.saved_model.load(exported['targets']['saved_model']).signatures[
        'serving_preprocessed']
    logits = serve(images=tf.constant(exported['examples'].images))['logits'].numpy()
    assert _relative_difference(logits, expected) <= 1e-5
    assert _relative_difference(_run_tflite(exported['targets']['tflite'],
                                            exported['examples'].images), expected) <= 1e-4
    int8 = _run_tflite(exported['targets']['tflite_int8'], exported['examples'].images)
    assert np.mean(int8.argmax(-1) == expected.argmax(-1)) >= 0.95
