r"""Writes docs/reference/models.md from the network registry: one row per registered
network, its parameters counted on a traced build of each (minutes: all 40 nets).

  python maintainer/model_table.py            # rewrites docs/reference/models.md
  python maintainer/model_table.py --check    # exit 1 when it is stale
"""
import inspect
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from cli import startup  # noqa: E402,F401  (first: configures TensorFlow before it loads)
import tensorflow as tf  # noqa: E402

from nets import flops, nets_factory  # noqa: E402

PAGE = os.path.join(ROOT, 'docs', 'reference', 'models.md')
HEADER = """\
# Networks

<!-- Written by maintainer/model_table.py from the network registry; do not edit by hand. -->

Every `--model_name`, from the registry (`nets/registry.py`). *parameters*: every
variable of the net built for inference with the classes shown, batch-norm statistics
included (as TF-Slim's model analyzer counted). *GFLOPs*: one image's forward pass at
the input size shown, a multiply-add counted as 2 (nets/flops.py says which ops
count). *checkpoint classes*: the classes of
TF-Slim's published checkpoint (for EfficientNet and EfficientNetV2, the official
release's) and, in brackets, the `--labels_offset` to use it with ImageNet converted
here (1001 classes, 0 = background). *preprocessing*: the family
used unless `--preprocessing_name` says otherwise. [networks.md](../networks.md) says
how the nets are built and checked.

| model_name | input | parameters | GFLOPs | checkpoint classes (`--labels_offset`) | preprocessing | TF-Slim checkpoint |
|---|---|---|---|---|---|---|
"""


def parameters_and_flops(spec, num_classes):
    """Every variable's size and one image's forward FLOPs, from one traced build (no
    full-size computation)."""
    net = nets_factory.get_network_fn(spec.name, num_classes)
    traced = tf.function(lambda x: net(x, training=False)).get_concrete_function(
        tf.TensorSpec([1, *spec.input_shape()], tf.float32))
    return (sum(v.shape.num_elements() for v in net.variables),
            flops.graph_flops(traced.graph))


def row(name):
    spec = nets_factory.get_spec(name)
    # The published checkpoint's classes, else the net's own default (slim's).
    classes = (spec.checkpoint_num_classes
               or inspect.signature(spec.builder).parameters['num_classes'].default)
    count, forward_flops = parameters_and_flops(spec, classes)
    parameters = (f'{count:,} @ {classes} classes' if classes
                  else f'{count:,} (no logits layer)')
    shape = 'x'.join(map(str, spec.input_shape()[:-1]))
    convention = (f'{spec.checkpoint_num_classes} ({spec.imagenet_labels_offset})'
                  if spec.checkpoint_num_classes else '-')
    return (f'| `{name}` | {shape} | {parameters} | {forward_flops / 1e9:.3g} | {convention} | '
            f'{spec.preprocessing_name} | {spec.checkpoint_file or "-"} |')


def page():
    return HEADER + ''.join(row(name) + '\n' for name in nets_factory.network_names())


def main(argv):
    text = page()
    current = open(PAGE).read() if os.path.exists(PAGE) else ''
    if '--check' in argv[1:]:
        if text != current:
            print('docs/reference/models.md is stale; run `python maintainer/model_table.py`.',
                  file=sys.stderr)
            return 1
        return 0
    if text != current:
        os.makedirs(os.path.dirname(PAGE), exist_ok=True)
        with open(PAGE, 'w') as f:
            f.write(text)
        print('Wrote docs/reference/models.md.')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
