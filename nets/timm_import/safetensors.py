"""A safetensors file read with numpy (no PyTorch, no `safetensors` package).

The format (huggingface/safetensors): 8 bytes, the header's length n as a little-endian
unsigned 64-bit integer; n bytes of JSON mapping each tensor's name to its dtype, shape
and data_offsets [begin, end) into the data that follows (plus an optional
'__metadata__' of strings); then the raw little-endian data. F32, F16 and BF16 tensors
are read (bfloat16 widened to float32 by its 16 high bits), and I64 ones (the batch
norms' num_batches_tracked counters that timm's state_dict saves) as float32 too;
anything else, or a file that is not of this format or is cut short, is a UsageError
naming the file.
"""
import json
import os
from typing import Dict, Optional, Tuple

import numpy as np

from core.errors import UsageError

HEADER_LENGTH_BYTES = 8
# A header is a few hundred kB even for timm's largest models; more is no safetensors.
MAX_HEADER_BYTES = 100 * 2 ** 20
DTYPES = {'F32': np.dtype('<f4'), 'F16': np.dtype('<f2'), 'BF16': np.dtype('<u2'),
          'I64': np.dtype('<i8')}


def _not_safetensors(path: str, why: str) -> UsageError:
    return UsageError(f'{path} is not a complete safetensors file ({why}); pass timm\'s '
                      f'model.safetensors as it was downloaded.')


def read_header(path: str) -> Tuple[dict, int]:
    """The header's tensor entries (by name) and where the data begins."""
    size = os.path.getsize(path)
    with open(path, 'rb') as f:
        length_bytes = f.read(HEADER_LENGTH_BYTES)
        if len(length_bytes) < HEADER_LENGTH_BYTES:
            raise _not_safetensors(path, f'{size} bytes, shorter than its header length')
        length = int.from_bytes(length_bytes, 'little')
        if length > min(MAX_HEADER_BYTES, size - HEADER_LENGTH_BYTES):
            raise _not_safetensors(path, f'a header length of {length} bytes in a file of '
                                   f'{size}')
        try:
            header = json.loads(f.read(length).decode('utf-8'))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise _not_safetensors(path, f'its header is no JSON: {error}') from None
    if not isinstance(header, dict):
        raise _not_safetensors(path, 'its header is no JSON object')
    header.pop('__metadata__', None)
    return header, HEADER_LENGTH_BYTES + length


def _entry(path: str, name: str, entry, data_bytes: int):
    """(dtype, shape, begin, end) of a header entry, checked against the data's size."""
    try:
        dtype, shape, (begin, end) = entry['dtype'], tuple(entry['shape']), \
            entry['data_offsets']
    except (KeyError, TypeError, ValueError):
        raise _not_safetensors(path, f'tensor {name!r} has no dtype, shape and '
                               f'data_offsets') from None
    if dtype not in DTYPES:
        raise UsageError(f'{path}: tensor {name!r} is {dtype}; timm weights are read in '
                         f'{", ".join(DTYPES)} only.')
    expected = int(np.prod(shape, dtype=np.int64)) * DTYPES[dtype].itemsize
    if not 0 <= begin <= end or end - begin != expected:
        raise _not_safetensors(path, f'tensor {name!r} {list(shape)} {dtype} spans bytes '
                               f'{begin}..{end}')
    if end > data_bytes:
        raise _not_safetensors(path, f'tensor {name!r} ends at byte {end} of the data, '
                               f'which holds {data_bytes}: the file is truncated')
    return DTYPES[dtype], shape, begin, end


def read(path: str) -> Dict[str, np.ndarray]:
    """Every tensor of the file as float32 numpy, in the header's data order (the order
    the model was saved in)."""
    if not os.path.isfile(path):
        raise UsageError(f'{path} does not exist; pass a timm model.safetensors file, or '
                         f'the Hugging Face snapshot folder holding it.')
    header, data_begin = read_header(path)
    data_bytes = os.path.getsize(path) - data_begin
    entries = {name: _entry(path, name, entry, data_bytes) for name, entry in header.items()}
    tensors = {}
    with open(path, 'rb') as f:
        for name, (dtype, shape, begin, end) in sorted(entries.items(),
                                                       key=lambda item: item[1][2]):
            f.seek(data_begin + begin)
            raw = np.frombuffer(f.read(end - begin), dtype=dtype).reshape(shape)
            tensors[name] = _as_float32(raw, header[name]['dtype'])
    return tensors


def _as_float32(raw: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == 'BF16':  # bfloat16 is float32's upper half
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(np.float32)


def write(path: str, tensors: Dict[str, np.ndarray], dtype: str = 'F32',
          metadata: Optional[Dict[str, str]] = None):
    """A safetensors file of the tensors (F32 or F16), for tests and goldens."""
    numpy_dtype = {'F32': np.dtype('<f4'), 'F16': np.dtype('<f2')}[dtype]
    header, chunks, offset = {}, [], 0
    for name, value in tensors.items():
        data = np.ascontiguousarray(value, dtype=numpy_dtype).tobytes()
        header[name] = {'dtype': dtype, 'shape': list(np.shape(value)),
                        'data_offsets': [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        header['__metadata__'] = dict(metadata)
    encoded = json.dumps(header, separators=(',', ':')).encode('utf-8')
    encoded += b' ' * (-len(encoded) % 8)  # the data 8-byte aligned, as the format asks
    with open(path, 'wb') as f:
        f.write(len(encoded).to_bytes(HEADER_LENGTH_BYTES, 'little'))
        f.write(encoded)
        for data in chunks:
            f.write(data)
