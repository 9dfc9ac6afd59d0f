"""The SavedModel's serving signatures as clients call them: uint8 images of any size
('serving_default'), encoded images ('serving_bytes') and tf.Examples
('serving_tf_example') run through TensorFlow's own saved_model_cli, each giving what
evaluation's preprocessing and the network give in process."""
import concurrent.futures
import io
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from helpers import testing_utils

from cli import export_job
from datasets import dataset_utils, shapes
from export import exporter, pipeline, saved_model_parity
from preprocessing import preprocessing_factory

SAVED_MODEL_CLI = str(pathlib.Path(sys.executable).parent / 'saved_model_cli')
SIZES = [(40, 48), (20, 26)]  # cifarnet's evaluation crops the first, pads the second


def _cifarnet_eval(images):
    """Logits as evaluation computes them: eval preprocessing, then the network."""
    preprocess = preprocessing_factory.get_preprocessing('cifarnet', is_training=False)
    return tf.stack([preprocess(tf.constant(image), 32, 32) for image in images])


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    """cifarnet exported as export_inference_graph.py does (its parity check included),
    and seeded uint8 images of two sizes."""
    work = tmp_path_factory.mktemp('serving')
    net = testing_utils.built_cifarnet()
    checkpoint = tf.train.Checkpoint(model=net).save(str(work / 'train' / 'model.ckpt'))
    targets = pipeline.resolve_targets(['saved_model'], export_dir=str(work / 'export'))
    export_job.export(export_job.ExportConfig(model_name='cifarnet', dataset_name='shapes',
                                              checkpoint_path=checkpoint,
                                              num_parity_examples=4),
                      pipeline.ExportRequest(targets))
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (count, *size, 3), dtype=np.uint8)
              for count, size in zip((3, 2), SIZES)]
    return dict(work=work, saved_model=targets['saved_model'], images=images,
                probabilities=[tf.nn.softmax(net(_cifarnet_eval(batch), training=False)[0])
                               .numpy() for batch in images])


def _saved_model_cli(saved_model, signature, input_name, values, outdir):
    """Runs `saved_model_cli run` on `values` (an .npy file); the outputs it saved."""
    outdir.mkdir(parents=True)
    np.save(outdir / 'input.npy', values, allow_pickle=True)
    env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
    result = subprocess.run(
        [SAVED_MODEL_CLI, 'run', '--dir', saved_model, '--tag_set', 'serve',
         '--signature_def', signature, '--inputs', f'{input_name}={outdir / "input.npy"}',
         '--outdir', str(outdir / 'outputs')],
        env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    return {path.stem: np.load(path, allow_pickle=True)
            for path in (outdir / 'outputs').glob('*.npy')}


def test_every_client_input_gives_evaluations_probabilities(exported):
    images = [image for batch in exported['images'] for image in batch]
    encoded = [tf.io.encode_png(image).numpy() for image in images]  # lossless
    calls = {  # name -> signature, input, values
        f'uint8_{h}x{w}': (exporter.DEFAULT_SIGNATURE, exporter.INPUT_NAME, batch)
        for (h, w), batch in zip(SIZES, exported['images'])}
    calls['bytes'] = (exporter.BYTES_SIGNATURE, exporter.BYTES_INPUT_NAME,
                      np.array(encoded, dtype=object))
    calls['tf_example'] = (exporter.TF_EXAMPLE_SIGNATURE, exporter.EXAMPLES_INPUT_NAME,
                           np.array([saved_model_parity.tf_example(e) for e in encoded],
                                    dtype=object))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_saved_model_cli, exported['saved_model'], *call,
                                     exported['work'] / 'cli' / name)
                   for name, call in calls.items()}
        outputs = {name: future.result() for name, future in futures.items()}

    expected = exported['probabilities']
    for (h, w), batch in zip(SIZES, expected):
        np.testing.assert_allclose(outputs[f'uint8_{h}x{w}']['probabilities'], batch,
                                   atol=1e-5)
    for name in ('bytes', 'tf_example'):
        np.testing.assert_allclose(outputs[name]['probabilities'], np.concatenate(expected),
                                   atol=1e-5)
        assert sorted(outputs[name]) == ['class_names', 'classes', 'logits', 'probabilities']
        assert [n.decode() for n in outputs[name]['class_names']] == [
            shapes.INFO.class_names[c] for c in outputs[name]['classes']]


def test_signatures_by_name_with_their_inputs(exported):
    signatures = tf.saved_model.load(exported['saved_model']).signatures
    specs = {name: next(iter(signatures[name].structured_input_signature[1].items()))
             for name in signatures}
    assert {name: (input_name, spec.dtype, spec.shape.as_list())
            for name, (input_name, spec) in specs.items()} == {
        'serving_default': ('images', tf.uint8, [None, None, None, 3]),
        'serving_bytes': ('image_bytes', tf.string, [None]),
        'serving_tf_example': ('serialized_examples', tf.string, [None]),
        'serving_preprocessed': ('images', tf.float32, [None, 32, 32, 3])}


def _pil_encoded(pixels, file_format):
    image_module = pytest.importorskip('PIL.Image')
    buffer = io.BytesIO()
    mode = {1: 'L', 3: 'RGB', 4: 'RGBA'}[pixels.shape[-1]]
    image_module.fromarray(pixels.squeeze(-1) if mode == 'L' else pixels, mode).save(
        buffer, file_format, **({'lossless': True} if file_format == 'WEBP' else {}))
    return buffer.getvalue()


def _layouts():
    """(name, encoded, the RGB pixels it holds) in every format and colour layout."""
    rng = np.random.default_rng(1)
    # Alpha from 1: lossless WebP may drop the colour of fully transparent pixels.
    grey, rgb, rgba = (rng.integers(1, 256, (18, 22, c), dtype=np.uint8) for c in (1, 3, 4))
    grey_alpha = np.concatenate([grey, rgba[..., 3:]], -1)
    as_rgb = {'grey': np.repeat(grey, 3, -1), 'rgb': rgb, 'rgba': rgba[..., :3]}
    cases = [('png_grey', tf.io.encode_png(grey).numpy(), as_rgb['grey']),
             ('png_grey_alpha', tf.io.encode_png(grey_alpha).numpy(), as_rgb['grey']),
             ('png_rgba', tf.io.encode_png(rgba).numpy(), as_rgb['rgba'])]
    for file_format in ('BMP', 'WEBP'):
        for layout, pixels in (('grey', grey), ('rgb', rgb), ('rgba', rgba)):
            cases.append((f'{file_format.lower()}_{layout}',
                          _pil_encoded(pixels, file_format), as_rgb[layout]))
    gif = _pil_encoded(rgb, 'GIF')  # a palette: compared with TensorFlow's decoding
    cases.append(('gif', gif, tf.io.decode_gif(gif)[0].numpy()))
    return cases


def test_bytes_of_any_format_and_colour_layout_are_decoded_as_rgb(exported):
    names, encoded, pixels = zip(*_layouts())
    serve = tf.saved_model.load(exported['saved_model']).signatures['serving_bytes']
    logits = serve(image_bytes=tf.constant(encoded))['logits'].numpy()
    served = tf.saved_model.load(exported['saved_model']).signatures['serving_preprocessed']
    expected = served(images=_cifarnet_eval(pixels))['logits'].numpy()
    for name, got, want in zip(names, logits, expected):
        np.testing.assert_allclose(got, want, atol=1e-5, err_msg=name)


def test_grey_models_take_colour_images_as_grey():
    rgb = np.random.default_rng(2).integers(0, 256, (6, 5, 3), dtype=np.uint8)
    png, webp = tf.io.encode_png(rgb).numpy(), _pil_encoded(rgb, 'WEBP')
    # PNG as the input pipeline decodes it; WebP, which TensorFlow decodes only in
    # colour, through tf.image.rgb_to_grayscale.
    np.testing.assert_array_equal(exporter.decode_image(png, 1),
                                  dataset_utils.decode_image(png, (None, None, 1)))
    np.testing.assert_array_equal(exporter.decode_image(webp, 1),
                                  tf.image.rgb_to_grayscale(rgb))
