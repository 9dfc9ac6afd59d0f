"""The layer kit: TF-Slim's layers as `tf.Module`s, with TF-Slim's variable names.

Every module is named by its path *relative* to the module that holds it ('conv1',
'Mixed_5b/Branch_1', or '' for no scope of its own, as NASNet's root-level cells).
Absolute scopes are resolved once, from the tree, when the outermost module is first
called; variables are then created under them from the input's static shape. So a
net declares each layer once, by its slim name, and nested blocks compose:

    class Block(layers.Module):
        def __init__(self):
            super().__init__('Mixed_5b')
            self.branch = layers.Sequential('Branch_1', [
                layers.Conv2D('Conv2d_0a_1x1', 48, 1), layers.Conv2D('Conv2d_0b_5x5', 64, 5)])

owns 'InceptionV3/Mixed_5b/Branch_1/Conv2d_0b_5x5/weights' inside a net 'InceptionV3'.

Computation runs in the input's dtype (float32, bfloat16, float16); variables stay
float32 and are cast on read; batch-norm parameters and statistics stay float32. What
slim spread with `arg_scope` is passed explicitly, quantization-aware training and
dropout's random generator included. L2 terms are read from the modules
(`regularization_losses()`), never collected into a global. `training` is a required
argument of every layer whose behaviour it can change.

The kit by job: `module` (the tree, scopes, L2 terms), `initializers`, `normalization`
(batch norm, layer norm, global response norm, LRN), `weighted` (conv of any rank,
separable conv, fully connected), `fake_quant` (quantization-aware training's
quantizers), `stateless` (pools, flatten, dropout, drop-path). `from nets import
layers` gives them all.
"""
from nets.layers.initializers import (  # noqa: F401
    Initializer, constant_initializer, ones_initializer, truncated_normal_initializer,
    variance_scaling_initializer, xavier_initializer, zeros_initializer)
from nets.layers.module import Module, Sequential, apply  # noqa: F401
from nets.layers.normalization import (  # noqa: F401
    BatchNorm, BatchNormParams, GlobalResponseNorm, LayerNorm,
    local_response_normalization)
from nets.layers.weighted import (  # noqa: F401
    Conv2D, Conv3D, ConvND, FullyConnected, IntTuple, SeparableConv2D, WeightedLayer,
    conv2d_same, recording_products)
from nets.layers.stateless import (  # noqa: F401
    avg_pool, drop_path, drop_path_rates, dropout, flatten, max_pool, random_seed,
    schedule_drop_path, stochastic_depth)
