"""How the benchmarks lay out their rounds on a shared, noisy machine (no TensorFlow
here: benchmarks/startup_time.py imports it without loading TensorFlow).

- The peak: matmul rates sampled for a while before and after each round, a round's
  peak the fastest of them (sample_rates, round_peaks).
- The order: comparing sides, round i starts with side i mod n (rotated), so that no
  side always runs first (after the warm-up or the peak's matmuls) or always last.
"""
import time
from typing import Callable, List, Sequence

# The peak is sampled this long before the first round and after each (one 4096x4096
# matmul takes 0.3-0.7 s here), and from at least MIN_PEAK_SAMPLES matmuls.
PEAK_SECONDS = 2.0
MIN_PEAK_SAMPLES = 3


def sample_rates(rate: Callable[[], float], seconds: float,
                 clock: Callable[[], float] = time.perf_counter,
                 min_samples: int = MIN_PEAK_SAMPLES) -> List[float]:
    """rate() called again and again for at least `seconds`, and min_samples times."""
    started, rates = clock(), []
    while len(rates) < min_samples or clock() - started < seconds:
        rates.append(rate())
    return rates


def round_peaks(windows: Sequence[Sequence[float]]) -> List[float]:
    """Round i's peak, from the matmul rates sampled before it (windows[i]) and after it
    (windows[i + 1]): the fastest of them. The best, not the median: a disturbance
    (another process taking a core) only ever slows a matmul down, so the fastest
    sample is the closest to what this process computes around the round; a median
    still moves when a disturbance covers half the samples."""
    return [max(*before, *after) for before, after in zip(windows, windows[1:])]


def rotated(sides: Sequence, round_index: int) -> list:
    """The sides in round round_index's order: from side round_index mod n on."""
    start = round_index % len(sides)
    return list(sides[start:]) + list(sides[:start])
