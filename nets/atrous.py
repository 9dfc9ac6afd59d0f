"""slim's output-stride bookkeeping, written once for every net that takes `output_stride`
(ResNet's stack_blocks_dense, MobileNet v1 and v2/v3, Inception-ResNet-v2).

Layers stride as the architecture says until the product of their strides, the current
stride, reaches `output_stride`. From there on a layer keeps the resolution (stride 1)
and runs at the current dilation rate, and its stride multiplies the rate of the layers
after it: atrous convolution, so the features stay at 1/output_stride of the input.
"""
from typing import Optional, Tuple


class AtrousSchedule:
    """Where each layer of a net runs: `stride, rate = schedule.place(layer_stride)`, in
    the order of the layers. `output_stride=None` keeps every stride."""

    def __init__(self, output_stride: Optional[int], current_stride: int = 1):
        self.output_stride = output_stride
        self.current_stride = current_stride
        self.rate = 1  # of the next layer placed past the output stride

    @property
    def reached(self) -> bool:
        return self.output_stride is not None and self.current_stride == self.output_stride

    def place(self, stride: int) -> Tuple[int, int]:
        """(stride, dilation rate) of the next layer, which the architecture strides by
        `stride`."""
        if self.reached:
            rate = self.rate
            self.rate *= stride
            return 1, rate
        self.current_stride *= stride
        return stride, 1

    def check_not_past(self):
        """Raises if the strides placed so far overshot the output stride (ResNet)."""
        if self.output_stride is not None and self.current_stride > self.output_stride:
            raise ValueError('The target output_stride cannot be reached.')

    def check_reached(self):
        """Raises unless the strides placed reach the output stride exactly (ResNet)."""
        if self.output_stride is not None and not self.reached:
            raise ValueError('The target output_stride cannot be reached.')
