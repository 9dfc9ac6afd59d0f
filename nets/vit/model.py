"""The Vision Transformer (Dosovitskiy et al. 2020, arXiv 2010.11929) on the layer kit,
with DINOv2's layer scale and register tokens (Oquab et al. 2023, arXiv 2304.07193;
Darcet et al. 2023, arXiv 2309.16588).

A p x p stride-p conv cuts the image into patches (the patch embedding); a learned class
token (and, optionally, register tokens) go before the patches' tokens, and a learned
position embedding is added (to the class token's too, unless `embed_prefix_tokens` is
False, as DINOv2 with registers). Pre-norm blocks follow: layer norm, multi-head
self-attention (one fused qkv dense layer, scaled dot products, a projection), an
optional per-channel layer scale, the residual add; layer norm, a GELU MLP (exact erf
GELU, 4x wide), layer scale, add. A final layer norm; the class token's features (or,
with pooling='avg', the patch tokens' mean, then the norm) feed the dense head. Every
layer norm has epsilon 1e-6 and every dense layer biases, as timm's and the releases'.

The position embedding is created for the grid of the first call's images. Called at
another size (any multiple of the patch), the net resamples it bicubically on the fly
(nets/vit/position_embedding.py), as timm's dynamic image size does; checkpoints of
another grid are resampled when restored (`resample_restored`).
"""
from typing import Optional

import tensorflow as tf

from core.errors import UsageError
from nets import heads, layers
from nets.network import EndPoints, Network
from nets.vit import position_embedding

EPSILON = 1e-6  # of every layer norm
MLP_RATIO = 4
WEIGHTS_INITIALIZER = layers.truncated_normal_initializer(0.02)
POSITION_EMBEDDING = 'position_embedding'


def _dense_on_tokens(layer, tokens, training):
    """A dense layer over the last axis of [batch, tokens, depth], as one 2-D matmul."""
    shape = tf.shape(tokens)
    flat = layer(tf.reshape(tokens, [-1, tokens.shape[-1]]), training=training)
    return tf.reshape(flat, tf.concat([shape[:-1], [layer.num_outputs]], 0))


class Attention(layers.Module):
    """Multi-head self-attention, 'attention': 'qkv' [depth, 3 * depth] (queries, keys,
    values, each head's channels contiguous in that order, as timm's fused qkv), then
    'projection' [depth, depth]."""

    def __init__(self, depth: int, num_heads: int, dense_options: dict):
        super().__init__('attention')
        if depth % num_heads:
            raise ValueError(f'depth {depth} is not a multiple of num_heads {num_heads}.')
        self.num_heads = num_heads
        self.qkv = layers.FullyConnected('qkv', 3 * depth, **dense_options)
        self.projection = layers.FullyConnected('projection', depth, **dense_options)

    def forward(self, tokens, *, training: bool):
        batch, length = tf.shape(tokens)[0], tf.shape(tokens)[1]
        depth = tokens.shape[-1]
        head_depth = depth // self.num_heads
        qkv = _dense_on_tokens(self.qkv, tokens, training)
        qkv = tf.reshape(qkv, [batch, length, 3, self.num_heads, head_depth])
        queries, keys, values = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))
        scores = tf.matmul(queries * tf.cast(head_depth ** -0.5, queries.dtype), keys,
                           transpose_b=True)
        attended = tf.matmul(tf.nn.softmax(scores, axis=-1), values)
        attended = tf.reshape(tf.transpose(attended, [0, 2, 1, 3]), [batch, length, depth])
        return _dense_on_tokens(self.projection, attended, training)


class Block(layers.Module):
    """'block_<i>': norm, attention, [layer scale], add; norm, MLP, [layer scale], add.
    The net's drop-path schedule sets `drop_path_rate`, both branches' (timm's)."""

    drop_path_rate = 0.0

    def __init__(self, index: int, depth: int, num_heads: int, *, layer_scale_init,
                 dense_options: dict):
        super().__init__(f'block_{index}')
        self.depth = depth
        self.layer_scale_init = layer_scale_init
        self.layer_norm_1 = layers.LayerNorm('layer_norm_1', epsilon=EPSILON)
        self.attention = Attention(depth, num_heads, dense_options)
        self.layer_norm_2 = layers.LayerNorm('layer_norm_2', epsilon=EPSILON)
        self.mlp = layers.Sequential('mlp', [
            layers.FullyConnected('fc_1', MLP_RATIO * depth, **dense_options),
            layers.FullyConnected('fc_2', depth, **dense_options)])
        self.layer_scale_1 = self.layer_scale_2 = None

    def _scaled(self, branch, name):
        if self.layer_scale_init is None:
            return branch
        scale = getattr(self, name)
        if scale is None:
            scale = self._add_variable(name, [self.depth],
                                       layers.constant_initializer(self.layer_scale_init))
            setattr(self, name, scale)
        return branch * tf.cast(scale, branch.dtype)

    def _mlp(self, tokens, training):
        fc_1, fc_2 = self.mlp.layers
        hidden = tf.nn.gelu(_dense_on_tokens(fc_1, tokens, training), approximate=False)
        return _dense_on_tokens(fc_2, hidden, training)

    def _residual(self, tokens, branch, scale_name, training, random_generator):
        branch = layers.stochastic_depth(self._scaled(branch, scale_name),
                                         self.drop_path_rate, training=training,
                                         random_generator=random_generator)
        return tokens + branch

    def forward(self, tokens, *, training: bool, random_generator=None):
        attended = self.attention(self.layer_norm_1(tokens, training=training),
                                  training=training)
        tokens = self._residual(tokens, attended, 'layer_scale_1', training,
                                random_generator)
        transformed = self._mlp(self.layer_norm_2(tokens, training=training), training)
        return self._residual(tokens, transformed, 'layer_scale_2', training,
                              random_generator)


class VisionTransformer(Network):
    """End points: 'patch_embedding' [batch, rows, columns, depth], 'block_0' ..
    'block_<n-1>' [batch, tokens, depth] (class token, register tokens, patches),
    'encoder_norm' (the final norm over every token; not with pooling='avg', whose norm
    follows the pooling), 'pre_logits' [batch, depth] (what num_classes=0 returns),
    'Logits', 'Predictions'. `base()` ends at 'encoder_norm' (the last block with 'avg')."""

    random_in_base = True  # drop-path's masks

    def __init__(self, num_classes: int = 1000, *, patch_size: int, depth: int,
                 num_blocks: int, num_heads: int, scope: str, weight_decay: float = 0.0,
                 is_training: bool = False, dropout_keep_prob: float = 1.0,
                 drop_path_rate: float = 0.0, layer_scale_init: Optional[float] = None,
                 num_register_tokens: int = 0, embed_prefix_tokens: bool = True,
                 pooling: str = 'token', spec=None, quantization=None):
        super().__init__(scope=scope, num_classes=num_classes, is_training=is_training,
                         spec=spec, quantization=quantization)
        if pooling not in ('token', 'avg'):
            raise ValueError(f"pooling must be 'token' or 'avg', got {pooling!r}.")
        self.patch_size, self.depth, self.pooling = patch_size, depth, pooling
        self.dropout_keep_prob = dropout_keep_prob
        self.num_register_tokens = num_register_tokens
        self.embed_prefix_tokens = embed_prefix_tokens
        dense_options = dict(activation=None, weights_initializer=WEIGHTS_INITIALIZER,
                             weight_decay=weight_decay, quantization=self.quantization)
        self.patch_embedding = layers.Conv2D('patch_embedding/conv', depth, patch_size,
                                             stride=patch_size, padding='VALID',
                                             **dense_options)
        self.blocks = [Block(i, depth, num_heads, layer_scale_init=layer_scale_init,
                             dense_options=dense_options) for i in range(num_blocks)]
        layers.schedule_drop_path(self.blocks, drop_path_rate)
        self.final_norm = layers.LayerNorm('final_norm', epsilon=EPSILON)
        self.logits = (layers.FullyConnected('head/logits', num_classes, **dense_options)
                       if num_classes else None)
        self.class_token = self.register_tokens = self.position_embedding = None
        self.grid = None  # the position embedding's (rows, columns)
        self.default_final_endpoint = ('encoder_norm' if pooling == 'token'
                                       else self.blocks[-1].relative_name)

    @property
    def residual_blocks(self):
        return list(self.blocks)

    @property
    def num_prefix_tokens(self) -> int:
        """The class token and the register tokens."""
        return 1 + self.num_register_tokens

    @property
    def num_embedded_prefix_tokens(self) -> int:
        """The tokens before the grid's in the position embedding."""
        return self.num_prefix_tokens if self.embed_prefix_tokens else 0

    def _grid_of(self, images):
        height, width = images.shape[1:3]
        if height is None or width is None:
            raise ValueError(f'{self.relative_name} needs images of a static size.')
        if height % self.patch_size or width % self.patch_size:
            raise UsageError(f'{self.relative_name} takes images whose height and width '
                             f'are multiples of its patch size, {self.patch_size}; got '
                             f'{height}x{width}. Pass an --image_size such as '
                             f'{max(1, height // self.patch_size) * self.patch_size}.')
        return height // self.patch_size, width // self.patch_size

    def _build_tokens(self, grid):
        self.grid = grid
        self.class_token = self._add_variable('class_token', [1, 1, self.depth],
                                              layers.zeros_initializer())
        if self.num_register_tokens:
            self.register_tokens = self._add_variable(
                'register_tokens', [1, self.num_register_tokens, self.depth],
                layers.zeros_initializer())
        length = self.num_embedded_prefix_tokens + grid[0] * grid[1]
        self.position_embedding = self._add_variable(POSITION_EMBEDDING,
                                                     [1, length, self.depth],
                                                     WEIGHTS_INITIALIZER)

    def _position_embedding(self, grid, dtype):
        embedding = tf.cast(self.position_embedding, dtype)
        return position_embedding.resample(embedding, grid, self.num_embedded_prefix_tokens,
                                           self.grid)

    def _tokens(self, patches):
        """[class, registers, patches] with the position embedding added."""
        batch, grid = tf.shape(patches)[0], tuple(patches.shape[1:3])
        if self.position_embedding is None:
            self._build_tokens(grid)
        dtype = patches.dtype
        tokens = tf.reshape(patches, [batch, grid[0] * grid[1], self.depth])
        prefix = [tf.cast(self.class_token, dtype)]
        if self.register_tokens is not None:
            prefix.append(tf.cast(self.register_tokens, dtype))
        prefix = tf.tile(tf.concat(prefix, axis=1), [batch, 1, 1])
        embedding = self._position_embedding(grid, dtype)
        if self.embed_prefix_tokens:
            return tf.concat([prefix, tokens], axis=1) + embedding
        return tf.concat([prefix, tokens + embedding], axis=1)

    def forward_base(self, images, *, final_endpoint, training, random_generator=None):
        end_points = EndPoints(final_endpoint)
        self._grid_of(images)
        patches = self.patch_embedding(images, training=training)
        if end_points.add('patch_embedding', patches):
            return patches, end_points
        tokens = self._tokens(patches)
        for block in self.blocks:
            tokens = block(tokens, training=training, random_generator=random_generator)
            if end_points.add(block.relative_name, tokens):
                return tokens, end_points
        if self.pooling == 'token':
            tokens = self.final_norm(tokens, training=training)
            if end_points.add('encoder_norm', tokens):
                return tokens, end_points
        raise end_points.unknown_final_endpoint()

    def forward(self, images, *, training, random_generator=None):
        tokens, end_points = self.forward_base(
            images, final_endpoint=self.default_final_endpoint, training=training,
            random_generator=random_generator)

        def pool(features):
            if self.pooling == 'token':
                return 'pre_logits', features[:, 0]
            pooled = tf.reduce_mean(features[:, self.num_prefix_tokens:], axis=1)
            return 'pre_logits', self.final_norm(pooled, training=training)

        output = heads.conv_classifier(
            tokens, self.logits, end_points, pool=pool,
            dropout_keep_prob=self.dropout_keep_prob, training=training,
            random_generator=random_generator, spatial_squeeze=False)
        return output, end_points

    def resample_restored(self, variable, value):
        """A stored value for `variable` of another shape, fitted to it: the position
        embedding resampled to the variable's grid; None for any other variable."""
        if variable is not self.position_embedding or value.ndim != 3 or \
                value.shape[-1] != self.depth:
            return None
        try:
            return position_embedding.resample_array(value, self.grid,
                                                     self.num_embedded_prefix_tokens)
        except ValueError:  # no square grid: not a position embedding of this net
            return None
