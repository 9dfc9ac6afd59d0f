"""Forward FLOPs of a network, counted from its traced inference graph.

Convention: a multiply-add is 2 FLOPs, and only the layers that multiply weights count:
convolutions (Conv2D, Conv3D, depthwise), matrix products (MatMul, BatchMatMul). Bias
adds, activations, batch norm, pooling and LRN are left out (under 1 % of a ResNet's
work); this is the convention of most published GFLOP figures (e.g. ResNet-50's ~8).

The count is exact for those ops: each is read off the op's static shapes in a graph
traced for one image, so padding, strides, dilation and groups are as executed.
TensorFlow's v1 profiler (`float_operation()`) counts the same convolutions alike but
adds every elementwise op it has a rule for, so its totals are not comparable across
nets with different elementwise work; it is also slower.
"""
import math
from typing import Callable

import tensorflow as tf

# Call ops whose function runs once per call; branches of an If take the larger one.
_CALL_OPS = {'PartitionedCall': ('f',), 'StatefulPartitionedCall': ('f',)}
_BRANCH_OPS = {'If': ('then_branch', 'else_branch'),
               'StatelessIf': ('then_branch', 'else_branch')}
_LOOP_OPS = ('While', 'StatelessWhile')


def _static(shape: tf.TensorShape, op) -> list:
    if not shape.is_fully_defined():
        raise ValueError(f'Cannot count the FLOPs of {op.type} {op.name}: its shape '
                         f'{shape} is not fully known.')
    return shape.as_list()


def _op_flops(op) -> int:
    """FLOPs of one op (2 per multiply-add), 0 for ops outside the convention."""
    if op.type in ('Conv2D', 'Conv3D'):
        kernel = _static(op.inputs[1].shape, op)  # [spatial..., in per group, out]
        return 2 * math.prod(_static(op.outputs[0].shape, op)) * math.prod(kernel[:-1])
    if op.type == 'DepthwiseConv2dNative':
        kernel = _static(op.inputs[1].shape, op)  # [h, w, in, multiplier]
        return 2 * math.prod(_static(op.outputs[0].shape, op)) * kernel[0] * kernel[1]
    if op.type == 'MatMul':
        left = _static(op.inputs[0].shape, op)
        inner = left[0] if op.get_attr('transpose_a') else left[1]
        return 2 * math.prod(_static(op.outputs[0].shape, op)) * inner
    if op.type in ('BatchMatMul', 'BatchMatMulV2', 'BatchMatMulV3'):
        left = _static(op.inputs[0].shape, op)
        inner = left[-2] if op.get_attr('adj_x') else left[-1]
        return 2 * math.prod(_static(op.outputs[0].shape, op)) * inner
    return 0


def _function_graph(graph, name: str):
    function = graph._get_function(name)  # pylint: disable=protected-access
    if function is None:
        raise ValueError(f'Cannot count FLOPs: function {name} is not in the graph.')
    return function.graph


def graph_flops(graph) -> int:
    """FLOPs of one run of `graph`, following the functions its call ops run."""
    total = 0
    for op in graph.get_operations():
        if op.type in _CALL_OPS:
            total += sum(graph_flops(_function_graph(graph, op.get_attr(attr).name))
                         for attr in _CALL_OPS[op.type])
        elif op.type in _BRANCH_OPS:
            total += max(graph_flops(_function_graph(graph, op.get_attr(attr).name))
                         for attr in _BRANCH_OPS[op.type])
        elif op.type in _LOOP_OPS:
            if graph_flops(_function_graph(graph, op.get_attr('body').name)):
                raise ValueError(f'Cannot count FLOPs inside loop {op.name}: its number '
                                 'of iterations is not in the graph.')
        else:
            total += _op_flops(op)
    return total


def forward_flops(forward: Callable, input_shape, dtype=tf.float32) -> int:
    """FLOPs of forward(images) for one input of input_shape (no batch dimension), e.g.
    `forward_flops(lambda x: net(x, training=False), (224, 224, 3))`."""
    traced = tf.function(forward, autograph=False).get_concrete_function(
        tf.TensorSpec([1, *input_shape], dtype))
    return graph_flops(traced.graph)


def network_forward_flops(network, image_shape) -> int:
    """FLOPs per image of `network`'s inference forward pass (its variables built)."""
    return forward_flops(lambda images: network(images, training=False), image_shape)
