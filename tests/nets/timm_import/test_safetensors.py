"""The numpy safetensors reader: F32, F16 and BF16 as written by our writer and by the
huggingface package (the goldens); damaged files end in one line."""
import json

import numpy as np
import pytest

from core.errors import UsageError
from nets.timm_import import safetensors

VALUES = np.array([[1.5, -2.25, 0.375], [65280.0, -0.0, 7.0]], np.float32)  # f16- and bf16-exact


@pytest.mark.parametrize('dtype', ['F32', 'F16'])
def test_written_tensors_read_back(tmp_path, dtype):
    path = str(tmp_path / 'model.safetensors')
    safetensors.write(path, {'b.weight': VALUES, 'a': VALUES[0]}, dtype=dtype,
                      metadata={'format': 'pt'})
    read = safetensors.read(path)
    assert list(read) == ['b.weight', 'a']  # the data's order
    np.testing.assert_array_equal(read['b.weight'], VALUES)  # every value f16-exact
    assert all(value.dtype == np.float32 for value in read.values())


def _raw_file(path, header: dict, data: bytes):
    encoded = json.dumps(header).encode()
    path.write_bytes(len(encoded).to_bytes(8, 'little') + encoded + data)
    return str(path)


def test_bfloat16_is_widened_exactly(tmp_path):
    bits = (VALUES.view(np.uint32) >> 16).astype('<u2')
    path = _raw_file(tmp_path / 'bf16.safetensors',
                     {'x': {'dtype': 'BF16', 'shape': [2, 3], 'data_offsets': [0, 12]}},
                     bits.tobytes())
    np.testing.assert_array_equal(safetensors.read(path)['x'], VALUES)


@pytest.mark.parametrize('content, why', [
    (b'', '0 bytes, shorter than its header length'),
    (b'PK\x03\x04' + b'\x00' * 60, 'a header length of'),  # a zip (torch's .pth, .bin)
    ((5).to_bytes(8, 'little') + b'{oops', 'its header is no JSON'),
])
def test_non_safetensors_files_are_refused(tmp_path, content, why):
    path = tmp_path / 'model.safetensors'
    path.write_bytes(content)
    with pytest.raises(UsageError, match=f'is not a complete safetensors file \\({why}'):
        safetensors.read(str(path))


def test_a_truncated_file_is_named_so(tmp_path):
    path = str(tmp_path / 'model.safetensors')
    safetensors.write(path, {'a': VALUES, 'b': VALUES})
    data = open(path, 'rb').read()
    open(path, 'wb').write(data[:-5])
    with pytest.raises(UsageError, match=r"tensor 'b' ends at byte 48 of the data, which "
                                         r"holds 43: the file is truncated"):
        safetensors.read(path)


def test_other_dtypes_are_named(tmp_path):
    path = _raw_file(tmp_path / 'i32.safetensors',
                     {'step': {'dtype': 'I32', 'shape': [], 'data_offsets': [0, 4]}},
                     b'\x00' * 4)
    with pytest.raises(UsageError, match="tensor 'step' is I32; timm weights are read in "
                                         "F32, F16, BF16, I64 only"):
        safetensors.read(path)


def test_int64_batch_norm_counters_are_read_as_float32(tmp_path):
    # timm's state_dict keeps each batch norm's num_batches_tracked, an int64 scalar.
    path = _raw_file(tmp_path / 'counter.safetensors',
                     {'bn1.num_batches_tracked': {'dtype': 'I64', 'shape': [],
                                                  'data_offsets': [0, 8]}},
                     (12345).to_bytes(8, 'little'))
    counter = safetensors.read(path)['bn1.num_batches_tracked']
    assert counter.dtype == np.float32 and counter.shape == () and counter == 12345
