"""The parity check run after every export: the artifact, reloaded, must compute what the
in-process model computes on the same images.

Float formats must match the model's logits within a relative tolerance (the largest
absolute difference over the largest absolute logit); int8 models are judged by top-1
agreement with the float model.

The parity images are never calibration images: an int8 model checked on the images
its ranges were calibrated on cannot show ranges calibrated too narrowly (an
inception_v3 passed 64/64 that way while its logits saturated on other inputs).
Synthetic calibration images come from another seed; a dataset split used for both
gives calibration the images after the parity ones.
"""
import dataclasses
from typing import Callable, List, Optional

import numpy as np
import tensorflow as tf

from core.errors import UsageError
from datasets import dataset_utils
from export import exporter, tflite

PARITY_SEED = 0
CALIBRATION_SEED = 1
_BATCH = 16


class ParityCheckFailed(UsageError):
    """An exported artifact computes something else than the model (removed by now).

    A UsageError so scripts end in one line: the message names what to look at."""


@dataclasses.dataclass(frozen=True)
class Examples:
    """Images as the network takes them, and, when they came from image files or were
    drawn as images, the same images encoded (what 'serving_bytes' takes)."""
    images: np.ndarray  # float32 [N, *input_shape]
    encoded: Optional[List[bytes]]
    source: str  # for the report: where the images came from


def _encoded_examples(spec, count: int, skip: int = 0):
    """`count` encoded images of a dataset split, after its first `skip`."""
    records = tf.data.TFRecordDataset(spec.list_files()).skip(skip).take(count)
    return [spec.parse(record)['encoded'].numpy() for record in records]


def _synthetic_encoded(count: int, shape, seed: int):
    """Seeded uint8 images, PNG-encoded (lossless, so decoding gives them back)."""
    rng = np.random.default_rng(seed)
    return [tf.io.encode_png(rng.integers(0, 256, shape, dtype=np.uint8)).numpy()
            for _ in range(count)]


def load_examples(count: int, input_shape, *, preprocess=None, decode_channels: int = 3,
                  spec=None, synthetic_image_shape=None, skip: int = 0,
                  seed: int = PARITY_SEED) -> Examples:
    """`count` examples from a dataset split (spec), after its first `skip`, else
    seeded synthetic ones.

    preprocess (uint8 image -> float32 input_shape) runs in process. Without it (video
    nets) synthetic inputs are drawn directly in the network's input range [-1, 1].
    """
    if preprocess is None:
        rng = np.random.default_rng(seed)
        images = rng.uniform(-1, 1, (count, *input_shape)).astype(np.float32)
        return Examples(images, None, f'{count} seeded synthetic inputs (seed {seed})')
    if spec is not None:
        encoded = _encoded_examples(spec, count, skip)
        source = f'{len(encoded)} images of {spec.name}/{spec.split_name}' + (
            f' (from image {skip + 1} on)' if skip else '')
    else:
        shape = synthetic_image_shape or (*input_shape[:2], decode_channels)
        encoded = _synthetic_encoded(count, shape, seed)
        source = f'{count} seeded synthetic images (seed {seed})'
    # Decoded and preprocessed here, eagerly, not by the exporter's code: the check must
    # catch a serving signature that preprocesses differently.
    images = np.stack([preprocess(dataset_utils.decode_image(
        tf.constant(e), (None, None, decode_channels))).numpy() for e in encoded]
                      ) if encoded else np.zeros((0, *input_shape))
    return Examples(images.astype(np.float32), encoded, source)


def _same_split(spec, other) -> bool:
    return other is not None and (spec.name, spec.split_name, spec.dataset_dir,
                                  spec.file_pattern, spec.files) == (
        other.name, other.split_name, other.dataset_dir, other.file_pattern, other.files)


def load_calibration_examples(count: int, input_shape, *, spec=None, parity_spec=None,
                              num_parity_examples: int = 0, **kwargs) -> Examples:
    """The int8 model's calibration images, none of them a parity image: synthetic ones
    from CALIBRATION_SEED, or a split's images after the parity ones when parity_spec
    is the same split. kwargs: as load_examples."""
    skip = num_parity_examples if spec is not None and _same_split(spec, parity_spec) else 0
    examples = load_examples(count, input_shape, spec=spec, skip=skip,
                             seed=CALIBRATION_SEED, **kwargs)
    if not len(examples.images):
        raise UsageError(f'{spec.name}/{spec.split_name} has no images left after the '
                         f'{skip} parity images to calibrate the int8 model on; pass '
                         f'another --calibration_split_name or fewer '
                         f'--num_parity_examples.')
    return examples


def reference_logits(network, images: np.ndarray) -> np.ndarray:
    """The in-process model's logits, in batches."""
    return _batched(lambda batch: network(batch, training=False)[0], images)


def _batched(function: Callable, inputs, batch_size: int = _BATCH) -> np.ndarray:
    return np.concatenate([np.asarray(function(inputs[i:i + batch_size]))
                           for i in range(0, len(inputs), batch_size)])


@dataclasses.dataclass(frozen=True)
class Result:
    """One artifact's comparison with the model (or, with note only, what was checked)."""
    name: str  # format, or format/signature
    max_abs_diff: Optional[float] = None
    relative_diff: Optional[float] = None
    agreement: Optional[float] = None  # top-1 agreement, 0..1
    count: int = 0
    tolerance: Optional[float] = None  # judged by relative difference ...
    min_agreement: Optional[float] = None  # ... or by agreement
    ok: bool = True
    note: str = ''

    @property
    def limit(self) -> str:
        if self.tolerance is not None:
            return f'limit {self.tolerance:g} relative'
        return f'at least {100 * self.min_agreement:g}% agreement'

    def line(self) -> str:
        if self.max_abs_diff is None:
            return f'parity {self.name}: {self.note}'
        return (f'parity {self.name}: max |logit diff| {self.max_abs_diff:.3g} (relative '
                f'{self.relative_diff:.3g}), top-1 agreement '
                f'{round(self.agreement * self.count)}/{self.count} '
                f'({100 * self.agreement:.1f}%); {self.limit}: '
                f'{"ok" if self.ok else "FAILED"}')


def compare(name: str, logits: np.ndarray, reference: np.ndarray, *,
            tolerance: Optional[float] = None,
            min_agreement: Optional[float] = None) -> Result:
    """Judges logits against the reference: by relative difference (tolerance) or by
    top-1 agreement (min_agreement)."""
    max_abs_diff = float(np.abs(logits - reference).max())
    relative_diff = max_abs_diff / max(float(np.abs(reference).max()), 1e-12)
    agreement = float(np.mean(logits.argmax(-1) == reference.argmax(-1)))
    ok = (relative_diff <= tolerance if tolerance is not None
          else agreement >= min_agreement)
    return Result(name, max_abs_diff, relative_diff, agreement, len(reference), tolerance,
                  min_agreement, ok)


def check_frozen_graph(path: str, examples: Examples, reference: np.ndarray,
                       tolerance: float, batch_size=None, as_text=False) -> List[Result]:
    run = exporter.graph_def_function(exporter.read_graph_def(path, as_text))
    logits = _batched(lambda batch: run(tf.constant(batch))[0], examples.images,
                      batch_size or _BATCH)
    return [compare('frozen_graph', logits, reference, tolerance=tolerance)]


def check_tflite(name: str, path: str, examples: Examples, reference: np.ndarray, *,
                 tolerance=None, min_agreement=None) -> List[Result]:
    logits = tflite.Runner(path)(examples.images)['logits']
    return [compare(name, logits, reference, tolerance=tolerance,
                    min_agreement=min_agreement)]
