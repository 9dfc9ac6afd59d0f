"""slim's output-stride bookkeeping, written once (nets/atrous.py)."""
import pytest

from nets.atrous import AtrousSchedule


def _placed(output_stride, strides, **schedule_options):
    schedule = AtrousSchedule(output_stride, **schedule_options)
    return [schedule.place(stride) for stride in strides], schedule


def test_without_an_output_stride_every_layer_keeps_its_stride():
    placed, schedule = _placed(None, [2, 1, 2, 2])
    assert placed == [(2, 1), (1, 1), (2, 1), (2, 1)]
    assert schedule.current_stride == 8
    schedule.check_reached()  # nothing to reach


def test_past_the_output_stride_strides_become_rates_of_the_layers_after():
    # MobileNet v1's strides at output stride 8: the third stride-2 layer keeps the
    # resolution (rate 1, like the layers before), the ones after dilate 2, then 4.
    placed, schedule = _placed(8, [2, 1, 2, 1, 2, 1, 2, 1, 1, 2, 1])
    assert placed == [(2, 1), (1, 1), (2, 1), (1, 1), (2, 1), (1, 1),
                      (1, 1), (1, 2), (1, 2), (1, 2), (1, 4)]
    assert schedule.reached and schedule.rate == 4


def test_a_net_may_start_past_its_first_strides():
    # Inception-ResNet-v2: stride 8 before Mixed_6a; at output stride 8 it keeps the
    # resolution and the 17x17 blocks after it dilate by 2.
    placed, schedule = _placed(8, [2], current_stride=8)
    assert placed == [(1, 1)] and schedule.rate == 2
    placed, schedule = _placed(16, [2], current_stride=8)
    assert placed == [(2, 1)] and schedule.rate == 1


def test_resnet_checks_raise_when_the_output_stride_cannot_be_met():
    _, overshot = _placed(2, [4])
    with pytest.raises(ValueError, match='cannot be reached'):
        overshot.check_not_past()
    _, short = _placed(16, [2, 2])
    with pytest.raises(ValueError, match='cannot be reached'):
        short.check_reached()
