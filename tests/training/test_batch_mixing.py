"""Mixup and cutmix (training.recipes.batch_mixing): images and targets mixed by one weight per
batch, cutmix's weight the unpasted fraction counted in pixels, seeded draws."""
import numpy as np
import pytest
import tensorflow as tf

from core.errors import UsageError
from training.recipes import batch_mixing
from training.recipes import losses
from training.loop import train_config

NUM_CLASSES = 5


def _constant_images(batch=4, height=12, width=10):
    """Example i is filled with i + 1: every pixel tells which example it came from."""
    values = np.arange(1, batch + 1, dtype=np.float32)
    return tf.constant(np.broadcast_to(values[:, None, None, None],
                                       (batch, height, width, 3)).copy())


def _labels(batch=4):
    return tf.constant(np.arange(batch) % NUM_CLASSES, tf.int64)


def _seed(k):
    return tf.constant([7, k], tf.int64)


def _smoothed(labels, smoothing):
    one_hot = np.eye(NUM_CLASSES, dtype=np.float32)[np.asarray(labels)]
    return one_hot * (1 - smoothing) + smoothing / NUM_CLASSES


@pytest.mark.parametrize('smoothing', [0.0, 0.1])
def test_mixup_mixes_images_and_targets_by_one_weight(smoothing):
    rng = np.random.default_rng(0)
    images = tf.constant(rng.uniform(-1, 1, (4, 6, 6, 3)).astype(np.float32))
    labels = _labels()
    config = batch_mixing.MixingConfig(mixup_alpha=0.4)
    mixed, mixed_labels = batch_mixing.mix_batch(images, labels, _seed(0), config)
    weight = float(mixed_labels.weight)
    assert 0.0 < weight < 1.0
    np.testing.assert_allclose(mixed, weight * images + (1 - weight) * images[::-1],
                               rtol=1e-6, atol=1e-6)
    targets = losses.targets(mixed_labels, NUM_CLASSES, smoothing).numpy()
    np.testing.assert_allclose(targets.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(targets, weight * _smoothed(labels, smoothing)
                               + (1 - weight) * _smoothed(labels[::-1], smoothing),
                               rtol=1e-6, atol=1e-7)


def test_cutmix_weight_is_the_unpasted_fraction_counted_in_pixels():
    images = _constant_images()
    partner_values = np.arange(4, 0, -1)  # example i's partner is example 3 - i
    config = batch_mixing.MixingConfig(cutmix_alpha=1.0)
    clipped = 0
    for k in range(40):
        mixed, mixed_labels = batch_mixing.mix_batch(images, _labels(), _seed(k), config)
        mixed = mixed.numpy()[..., 0]
        weight = float(mixed_labels.weight)
        for i in range(4):
            pasted = mixed[i] == partner_values[i]
            assert np.all(pasted | (mixed[i] == i + 1))  # pasted, not blended
            assert weight == pytest.approx(1.0 - pasted.mean(), abs=1e-6)
        rows, columns = np.nonzero(mixed[0] == partner_values[0])
        if rows.size:  # one rectangle
            height, width = rows.max() + 1 - rows.min(), columns.max() + 1 - columns.min()
            assert height * width == rows.size
            # timm's box has even sides (centre -+ half a side) unless the border cut it.
            clipped += height % 2 == 1 or width % 2 == 1
        targets = losses.targets(mixed_labels, NUM_CLASSES, 0.0).numpy()
        np.testing.assert_allclose(targets.sum(axis=1), 1.0, rtol=1e-6)
        np.testing.assert_allclose(targets[0, [0, 3]], [weight, 1 - weight], rtol=1e-6,
                                   atol=1e-7)
    # Some boxes were cut by the border: the weight followed the clipped area.
    assert clipped > 0


def test_off_leaves_the_batch_unchanged():
    images, labels = _constant_images(), _labels()
    for config in (batch_mixing.MixingConfig(),
                   batch_mixing.MixingConfig(mixup_alpha=0.2, mix_prob=0.0)):
        assert not config.enabled
        assert batch_mixing.mix_batch(images, labels, _seed(0), config) == (images, labels)
    # Mixing on, but this batch not drawn for it: weight 1, images as they were.
    rarely = batch_mixing.MixingConfig(mixup_alpha=0.2, cutmix_alpha=1.0, mix_prob=1e-9)
    for k in range(4):
        mixed, mixed_labels = batch_mixing.mix_batch(images, labels, _seed(k), rarely)
        assert float(mixed_labels.weight) == 1.0
        np.testing.assert_array_equal(mixed, images)


def test_the_same_seed_gives_the_same_mix():
    images, labels = _constant_images(), _labels()
    config = batch_mixing.MixingConfig(mixup_alpha=0.2, cutmix_alpha=1.0)
    first = batch_mixing.mix_batch(images, labels, _seed(3), config)
    again = batch_mixing.mix_batch(images, labels, _seed(3), config)
    np.testing.assert_array_equal(first[0], again[0])
    assert float(first[1].weight) == float(again[1].weight)
    weights = {float(batch_mixing.mix_batch(images, labels, _seed(k), config)[1].weight)
               for k in range(8)}
    assert len(weights) > 4


def test_switch_probability_picks_cutmix_or_mixup():
    images, labels = _constant_images(), _labels()

    def is_cutmix(switch_prob, k):
        config = batch_mixing.MixingConfig(mixup_alpha=1.0, cutmix_alpha=1.0,
                                           mix_switch_prob=switch_prob)
        mixed = batch_mixing.mix_batch(images, labels, _seed(k), config)[0].numpy()
        return set(np.unique(mixed[0])) <= {1.0, 4.0}  # cutmix: no blended values

    assert all(is_cutmix(1.0, k) for k in range(6))
    assert not any(is_cutmix(0.0, k) for k in range(6))


@pytest.mark.parametrize('settings, flag', [
    (dict(mixup_alpha=-0.1), '--mixup_alpha=-0.1'),
    (dict(cutmix_alpha=-1.0), '--cutmix_alpha=-1'),
    (dict(mix_prob=1.5), '--mix_prob=1.5'),
    (dict(mix_switch_prob=-0.5), '--mix_switch_prob=-0.5'),
])
def test_out_of_range_settings_name_their_flag(settings, flag):
    with pytest.raises(UsageError, match=flag) as raised:
        batch_mixing.MixingConfig(**settings)
    assert '\n' not in str(raised.value)


def test_jit_compile_with_mixing_is_refused_in_one_line(tmp_path):
    with pytest.raises(UsageError, match='drop --jit_compile') as raised:
        train_config.TrainConfig(train_dir=str(tmp_path), batch_size=8, jit_compile=True,
                                 mixing=batch_mixing.MixingConfig(cutmix_alpha=1.0))
    assert '\n' not in str(raised.value)
