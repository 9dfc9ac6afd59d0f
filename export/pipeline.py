"""Writes the requested export formats, each checked against the model before it is
put in place: an artifact that fails its parity check is removed and the export stops.

Each artifact is written beside its target ('<target>.partial'), checked there, then
moved into place, so a failed or interrupted export never leaves a broken model where
a good one (with --overwrite) used to be.
"""
import dataclasses
import os
import shutil
from typing import Dict, Mapping, Optional, Sequence

from absl import logging
import tensorflow as tf

from core import paths
from core.errors import UsageError
from datasets import dataset_utils
from export import exporter, parity, saved_model_parity, slim_graph, tflite

FORMATS = ('saved_model', 'graphdef', 'frozen_graph', 'tflite', 'tflite_int8',
           'slim_checkpoint')
_FILE_NAMES = {'saved_model': 'saved_model', 'graphdef': 'inference_graph.pb',
               'frozen_graph': 'frozen_graph.pb', 'tflite': 'model_float.tflite',
               'tflite_int8': 'model_int8.tflite', 'slim_checkpoint': 'slim_checkpoint'}
# What only a checkpoint's weights make worth writing: fresh weights frozen in would
# pass for a model.
NEED_CHECKPOINT = ('frozen_graph', 'slim_checkpoint')
_SINGLE_FILE = ('graphdef', 'frozen_graph', 'tflite', 'tflite_int8')
_GRAPH_FORMATS = ('graphdef', 'frozen_graph')


def parse_formats(value: Optional[str]) -> tuple:
    """'saved_model,tflite' -> ('saved_model', 'tflite'), in FORMATS' order."""
    names = [name.strip() for name in (value or '').split(',') if name.strip()]
    unknown = [name for name in names if name not in FORMATS]
    if unknown:
        raise UsageError(f'Unknown --export_format {",".join(unknown)}; use one or several '
                         f'(comma-separated) of: {", ".join(FORMATS)}.')
    return tuple(name for name in FORMATS if name in names)


def resolve_targets(formats: Sequence[str], *, export_dir: Optional[str] = None,
                    saved_model_dir: Optional[str] = None,
                    output_file: Optional[str] = None,
                    write_text_graphdef: bool = False) -> Dict[str, str]:
    """format -> path. --saved_model_dir places the SavedModel; --output_file the one
    single-file format asked for; everything else goes into --export_dir under a fixed
    name (README "Export and deploy")."""
    if not formats:
        raise UsageError('Nothing to export; pass --export_dir (with --export_format), '
                         'or --saved_model_dir and/or --output_file.')
    files = [name for name in formats if name in _SINGLE_FILE]
    if output_file and len(files) > 1 and not export_dir:
        raise UsageError(f'--output_file names one file but {", ".join(files)} were asked '
                         f'for; pass --export_dir=DIR to write them all.')
    targets = {}
    for name in formats:
        if name == 'saved_model' and saved_model_dir:
            targets[name] = saved_model_dir
        elif name in files and output_file and len(files) == 1:
            targets[name] = output_file
        elif export_dir:
            file_name = _FILE_NAMES[name]
            if write_text_graphdef and name in _GRAPH_FORMATS:
                file_name += 'txt'
            targets[name] = os.path.join(export_dir, file_name)
        else:
            raise UsageError(f'No place to write {name}; pass --export_dir=DIR.')
    return targets


def _exists(path: str) -> bool:
    if tf.io.gfile.isdir(path):
        return bool(tf.io.gfile.listdir(path))
    return tf.io.gfile.exists(path)


def check_targets_free(targets: Mapping[str, str], overwrite: bool):
    """Refuses to replace what is there, unless overwrite."""
    taken = [path for path in targets.values() if _exists(path)]
    if taken and not overwrite:
        raise UsageError(f'{", ".join(taken)} already exist{"s" if len(taken) == 1 else ""}'
                         f'; pass --overwrite to replace, or export elsewhere.')


def check_labels_free(labels_dir: Optional[str], class_names: Optional[Mapping[int, str]],
                      overwrite: bool):
    """Refuses to replace a labels.txt with other lines (another export's, or a file the
    export did not write), unless overwrite; the same lines are left as they are."""
    if overwrite or not labels_dir or not class_names:
        return
    path = os.path.join(labels_dir, dataset_utils.LABELS_FILENAME)
    if not tf.io.gfile.exists(path):
        return
    with tf.io.gfile.GFile(path) as f:
        if f.read() == dataset_utils.label_file_text(class_names):
            return
    raise UsageError(f'{path} already exists with other class names; pass --overwrite to '
                     f'replace it, or export elsewhere.')


def _remove(path: str):
    if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)
    elif tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


def _move_into_place(staging: str, target: str):
    _remove(target)
    shutil.move(staging, target)


@dataclasses.dataclass(frozen=True)
class ExportRequest:
    """What to write, where, and how each artifact is judged."""
    targets: Mapping[str, str]  # format -> path (resolve_targets)
    batch_size: Optional[int] = None  # graph inputs; TFLite: 1 when None
    write_text_graphdef: bool = False
    training_graph: bool = False  # slim's --is_training: graphdef only
    tflite_io_dtype: str = 'uint8'  # int8 model's input and output
    float_tolerance: float = 1e-4  # relative, float formats
    min_int8_agreement: float = 0.95
    overwrite: bool = False
    labels_dir: Optional[str] = None  # where labels.txt goes (TFLite has no class names)

    def __post_init__(self):
        if self.training_graph and set(self.targets) != {'graphdef'}:
            raise UsageError('--is_training graphs (dropout and batch norm in training '
                             'mode) can only be written as --export_format=graphdef; '
                             'drop --is_training for the inference formats.')
        if self.tflite_io_dtype not in tflite.IO_DTYPES:
            raise UsageError(f'Unknown --tflite_io_dtype {self.tflite_io_dtype!r}; use '
                             f'{" or ".join(tflite.IO_DTYPES)}.')
        if not 0.0 <= self.min_int8_agreement <= 1.0:
            raise UsageError(f'--min_int8_agreement={self.min_int8_agreement} is a '
                             f'fraction; pass a value between 0 and 1, e.g. 0.95.')
        if self.batch_size is not None and self.batch_size < 1:
            raise UsageError(f'--batch_size={self.batch_size}; pass a positive size, or '
                             f'none for any batch.')
        if self.float_tolerance < 0:
            raise UsageError(f'--parity_tolerance={self.float_tolerance:g} is out of range; '
                             f'pass a relative tolerance of 0 or more, e.g. 1e-4.')
        # Before any TensorFlow work: a wrong place or an existing export ends in one line.
        for name, target in self.targets.items():
            in_export_dir = self.labels_dir and target.startswith(self.labels_dir)
            if name == 'saved_model':
                paths.check_output_dir(target, '--export_dir' if in_export_dir
                                       else '--saved_model_dir')
            else:
                paths.check_output_dir(os.path.dirname(target) or '.', '--export_dir'
                                       if in_export_dir else 'the directory of --output_file')
        check_targets_free(self.targets, self.overwrite)


def _write(name: str, path: str, network, serving, request, calibration):
    text = request.write_text_graphdef
    if name == 'saved_model':
        exporter.export_saved_model(network, path, serving)
    elif name == 'graphdef':
        exporter.write_graph_def(exporter.inference_graph_def(
            network, serving, request.batch_size, request.training_graph), path, text)
    elif name == 'frozen_graph':
        exporter.write_graph_def(exporter.frozen_graph_def(
            network, serving, request.batch_size), path, text)
    elif name == 'slim_checkpoint':
        slim_graph.write_checkpoint(network.variables, path)
    else:
        model = tflite.convert(network, serving, batch_size=request.batch_size or 1,
                               int8=name == 'tflite_int8',
                               representative_images=calibration() if name == 'tflite_int8'
                               else None, io_dtype=request.tflite_io_dtype)
        with tf.io.gfile.GFile(path, 'wb') as f:
            f.write(model)


def _check_slim_format(name, path, network, request, examples, reference):
    """graphdef: run with the network's variables read by TF-Slim's names (what
    freeze_graph with its checkpoint gives); slim_checkpoint: read back, value by value."""
    if name == 'slim_checkpoint':
        prefix = os.path.join(path, slim_graph.CHECKPOINT_PREFIX)
        differing = slim_graph.checkpoint_differences(prefix, network.variables)
        return [parity.Result(name, ok=not differing, note=(
            f'{len(network.variables)} variables under TF-Slim\'s names, equal to the '
            f'model\'s' if not differing else f'variables missing or different: '
            f'{", ".join(differing[:3])}'))]
    run = slim_graph.graph_def_function(
        exporter.read_graph_def(path, request.write_text_graphdef), network.variables,
        exporter.OUTPUT_NAMES[:1])
    logits = slim_graph.run_batched(run, examples.images, request.batch_size)
    return [parity.compare(name, logits, reference, tolerance=request.float_tolerance)]


def _check(name, path, serving, request, examples, reference, quantization_aware):
    text = request.write_text_graphdef
    if name == 'saved_model':
        return saved_model_parity.check_saved_model(path, serving, examples, reference,
                                                    request.float_tolerance)
    if name == 'frozen_graph':
        return parity.check_frozen_graph(path, examples, reference, request.float_tolerance,
                                         request.batch_size, text)
    if name == 'tflite' and not quantization_aware:
        return parity.check_tflite(name, path, examples, reference,
                                   tolerance=request.float_tolerance)
    # int8, or float TFLite of a quantization-aware net: its quantize/dequantize pairs
    # turn float rounding differences into whole quantization steps; judged as int8.
    return parity.check_tflite(name, path, examples, reference,
                               min_agreement=request.min_int8_agreement)


def _failure(result: parity.Result, target: str) -> parity.ParityCheckFailed:
    if result.max_abs_diff is None:
        detail, fix = result.note, 'please report this exporter bug'
    elif result.tolerance is None:
        quantized = 'int8' if result.name == 'tflite_int8' else 'quantization-aware'
        detail = (f'{quantized} top-1 agreement with the model is '
                  f'{100 * result.agreement:.1f}% over {result.count} images, under '
                  f'--min_int8_agreement={result.min_agreement:g}')
        fix = 'calibrate on real images with --dataset_dir, or lower --min_int8_agreement'
    else:
        detail = (f'its logits differ from the model\'s by up to {result.max_abs_diff:.3g} '
                  f'({result.relative_diff:.3g} relative, limit {result.tolerance:g}) over '
                  f'{result.count} images')
        fix = 'the export and the model disagree on weights or preprocessing'
    return parity.ParityCheckFailed(
        f'Export {result.name} failed its parity check: {detail}; nothing was written to '
        f'{target} ({fix}).')


def export(network, serving: exporter.ServingInfo, request: ExportRequest,
           examples: parity.Examples, calibration=None, log=print) -> list:
    """Writes and checks every target in request; returns the parity results.

    examples: the parity check's inputs; calibration: a callable returning the
    representative images for int8 (called only when tflite_int8 is asked for).
    Raises ParityCheckFailed, after removing the artifact, on the first that fails.
    """
    check_targets_free(request.targets, request.overwrite)
    check_labels_free(request.labels_dir, serving.class_names, request.overwrite)
    reference = parity.reference_logits(network, examples.images)
    log(f'Parity check on {examples.source}.')
    results = []
    for name, target in request.targets.items():
        staging = target.rstrip('/') + '.partial'
        _remove(staging)
        if os.path.dirname(staging):
            tf.io.gfile.makedirs(os.path.dirname(staging))
        try:
            _write(name, staging, network, serving, request, calibration)
            if request.training_graph:
                checked = [parity.Result(name, note='training graph (structure only), not '
                                         'compared')]
            elif name in ('graphdef', 'slim_checkpoint'):
                checked = _check_slim_format(name, staging, network, request, examples,
                                             reference)
            else:
                checked = _check(name, staging, serving, request, examples, reference,
                                 network.quantization is not None)
        except BaseException:
            _remove(staging)
            raise
        for result in checked:
            log(result.line())
        failed = [result for result in checked if not result.ok]
        if failed:
            _remove(staging)
            raise _failure(failed[0], target)
        _move_into_place(staging, target)
        logging.info('Wrote %s to %s.', name, target)
        results.extend(checked)
    if serving.class_names and request.labels_dir:
        tf.io.gfile.makedirs(request.labels_dir)
        dataset_utils.write_label_file(serving.class_names, request.labels_dir,
                                       replace=True)  # checked first
    return results
