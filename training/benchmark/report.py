"""What a benchmark run measured (training.benchmark), as the text block the scripts print
and as the JSON --benchmark_json writes: the same fields, documented in
docs/performance.md ("Benchmark mode")."""
import dataclasses
import json
import os
import statistics
from typing import Optional, Sequence

from core.errors import UsageError


@dataclasses.dataclass(frozen=True)
class Spread:
    """One figure over the rounds: median [min, max]."""
    per_round: tuple

    @classmethod
    def of(cls, values: Sequence[float]) -> 'Spread':
        return cls(tuple(float(v) for v in values))

    median = property(lambda self: statistics.median(self.per_round))
    low = property(lambda self: min(self.per_round))
    high = property(lambda self: max(self.per_round))

    def text(self, style=None, unit: str = '') -> str:
        style = style or _number
        return (f'{style(self.median)}{unit} median [{style(self.low)}, '
                f'{style(self.high)}]')

    def as_json(self) -> dict:
        return {'median': self.median, 'min': self.low, 'max': self.high,
                'per_round': list(self.per_round)}


def _number(value: float) -> str:
    """Three significant figures, thousands with a separator: 14.2, 0.0656, 1,490."""
    if abs(value) >= 100:
        return f'{value:,.0f}'
    return f'{value:.3g}'


def _fraction(value: float) -> str:
    return f'{value:.2f}'


def _percent(value: float) -> str:
    return f'{100 * value:.1f} %'


def _within_peak(fractions: Spread):
    """(the rounds' fractions at most 1 as a Spread, or None; [(round, fraction)] of
    those above 1). Above 1 is no figure: the peak was disturbed throughout its
    samples, or the round ran faster than any matmul around it."""
    within = [f for f in fractions.per_round if f <= 1]
    above = [(i + 1, f) for i, f in enumerate(fractions.per_round) if f > 1]
    return (Spread.of(within) if within else None), above


def _of_peak_text(fractions: Spread) -> str:
    within, above = _within_peak(fractions)
    if not above:
        return within.text(_fraction)
    rounds = ', '.join(f'round {number} at {_fraction(f)}' for number, f in above)
    flag = f'(above peak: {rounds}; the machine was disturbed; re-run)'
    if within is None:
        return f'n/a {flag}'
    return f'{within.text(_fraction)} of {len(within.per_round)} rounds {flag}'


@dataclasses.dataclass(frozen=True)
class Setting:
    """What was benchmarked."""
    model_name: str
    task: str  # 'training' or 'evaluation'
    precision: str
    batch_size: int  # per replica
    replicas: int
    image_shape: tuple  # (height, width, channels)
    data: str  # 'synthetic', or '<dataset>/<split> from <dataset_dir>'

    @property
    def flops_per_image_factor(self) -> int:
        """A training step does the forward pass and about twice its work backward."""
        return 3 if self.task == 'training' else 1


@dataclasses.dataclass(frozen=True)
class BenchmarkResult:
    setting: Setting
    rounds: int
    steps_per_round: int
    warmup_steps: int
    images_per_second: Spread
    forward_flops_per_image: int
    peak_dtype: str
    peak_matrix_size: int
    peak_seconds: float  # sampled this long before the first round and after each
    peak_gflops: Spread
    achieved_gflops: Spread
    fraction_of_peak: Spread
    # Real input only: the step's rate on a synthetic batch of the same shape, and the
    # share of step time spent waiting for input derived from the two.
    synthetic_images_per_second: Optional[Spread] = None
    input_wait: Optional[Spread] = None

    def text(self) -> str:
        setting = self.setting
        height, width, channels = setting.image_shape
        replicas = (f' x {setting.replicas} replicas' if setting.replicas > 1 else '')
        factor = setting.flops_per_image_factor
        lines = [
            f'Benchmark: {setting.model_name} {setting.task}, {setting.precision}, batch '
            f'{setting.batch_size}{replicas}, {height}x{width}x{channels}, '
            f'{setting.data}',
            f'  speed         {self.images_per_second.text(unit=" img/s")} over '
            f'{self.rounds} rounds of {self.steps_per_round} steps (after '
            f'{self.warmup_steps} warm-up steps)',
            f'  forward       {_number(self.forward_flops_per_image / 1e9)} GFLOP per '
            'image (traced graph: conv and matmul, 2 FLOPs per multiply-add)',
            f'  achieved      {self.achieved_gflops.text(unit=" GFLOP/s")} ('
            + ('3 x forward x img/s: forward and backward)' if factor == 3
               else 'forward x img/s)'),
            f'  matmul peak   {self.peak_gflops.text(unit=" GFLOP/s")} ({self.peak_dtype} '
            f'{self.peak_matrix_size}x{self.peak_matrix_size} matmul, the fastest in '
            f'{self.peak_seconds:g} s before and after each round, this process)',
            f'  of peak       {_of_peak_text(self.fraction_of_peak)}',
        ]
        if self.input_wait is None:
            lines.append('  input wait    n/a with synthetic data, the no-wait reference '
                         '(--dataset_dir measures the input pipeline\'s)')
        else:
            lines.append(f'  input wait    {self.input_wait.text(_percent)} of step time '
                         '(against synthetic data: '
                         f'{self.synthetic_images_per_second.text(unit=" img/s")})')
        return '\n'.join(lines)

    def as_json(self) -> dict:
        setting = self.setting
        return {
            'model_name': setting.model_name, 'task': setting.task,
            'precision': setting.precision, 'batch_size': setting.batch_size,
            'replicas': setting.replicas, 'image_shape': list(setting.image_shape),
            'data': setting.data, 'rounds': self.rounds,
            'steps_per_round': self.steps_per_round, 'warmup_steps': self.warmup_steps,
            'images_per_second': self.images_per_second.as_json(),
            'forward_gflop_per_image': self.forward_flops_per_image / 1e9,
            'flops_per_image_factor': setting.flops_per_image_factor,
            'achieved_gflops': self.achieved_gflops.as_json(),
            'peak': {'dtype': self.peak_dtype, 'matrix_size': self.peak_matrix_size,
                     'seconds_sampled': self.peak_seconds,
                     'gflops': self.peak_gflops.as_json()},
            'fraction_of_peak': self._fraction_json(),
            'synthetic_images_per_second': (self.synthetic_images_per_second.as_json()
                                            if self.synthetic_images_per_second else None),
            'input_wait_fraction': self.input_wait.as_json() if self.input_wait else None,
        }

    def _fraction_json(self) -> dict:
        """median, min and max of the rounds at most 1 (null if none), every round's
        fraction, and the rounds above 1 (numbered from 1)."""
        within, above = _within_peak(self.fraction_of_peak)
        figures = (within.as_json() if within is not None
                   else dict.fromkeys(('median', 'min', 'max')))
        return {**figures, 'per_round': list(self.fraction_of_peak.per_round),
                'rounds_above_peak': [number for number, _ in above]}

    def write_json(self, path: str):
        """Writes as_json() to path (its directory created); one line if it cannot."""
        try:
            directory = os.path.dirname(os.path.abspath(path))
            os.makedirs(directory, exist_ok=True)
            with open(path, 'w', encoding='utf-8') as output:
                json.dump(self.as_json(), output, indent=2)
                output.write('\n')
        except OSError as error:
            raise UsageError(f'Cannot write --benchmark_json={path} ({error.strerror}); '
                             'pass a writable file path.') from None
