"""--batch_norm_decay / --batch_norm_epsilon reach every batch norm of every net that has
one (the registry's `batch_norm` says which), and a net without one refuses them."""
import dataclasses

import pytest

from core.errors import UsageError
from nets import layers, nets_factory


def _batch_norms(net):
    return [m for m in net.submodules if isinstance(m, layers.BatchNorm)]


@pytest.mark.parametrize('name', nets_factory.network_names())
def test_every_batch_norm_takes_the_flags(name):
    spec = nets_factory.get_spec(name)
    if spec.batch_norm is None:
        assert not _batch_norms(nets_factory.get_network_fn(name, 10))
        with pytest.raises(UsageError, match='has no batch norm'):
            nets_factory.get_network_fn(name, 10, batch_norm_decay=0.9)
        return
    defaults = _batch_norms(nets_factory.get_network_fn(name, 10))
    assert defaults and {bn.params for bn in defaults} == {spec.batch_norm}
    net = nets_factory.get_network_fn(name, 10, batch_norm_decay=0.9, batch_norm_epsilon=0.01)
    expected = dataclasses.replace(spec.batch_norm, decay=0.9, epsilon=0.01)
    assert {bn.params for bn in _batch_norms(net)} == {expected}


@pytest.mark.parametrize('flags, message', [
    (dict(batch_norm_decay=1.0), 'below 1'), (dict(batch_norm_decay=-0.1), 'at least 0'),
    (dict(batch_norm_epsilon=0.0), 'above 0')])
def test_values_out_of_range_are_refused(flags, message):
    with pytest.raises(UsageError, match=message):
        nets_factory.get_network_fn('mobilenet_v1', 10, **flags)
