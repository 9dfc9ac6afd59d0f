r"""Prints README's model table from the registry: one row per registered network.

  .venv/bin/python scripts/model_table.py
"""
import inspect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cli import startup  # noqa: E402,F401  (first: configures TensorFlow before it loads)
import tensorflow as tf  # noqa: E402

from nets import nets_factory  # noqa: E402


def parameter_count(spec, num_classes):
    """Every variable's size, batch-norm statistics included (as slim's model analyzer),
    from a traced build (no full-size computation)."""
    net = nets_factory.get_network_fn(spec.name, num_classes)
    tf.function(lambda x: net(x)).get_concrete_function(
        tf.TensorSpec([1, *spec.input_shape()], tf.float32))
    return sum(v.shape.num_elements() for v in net.variables)


def main():
    print('| model_name | input | parameters | classes of the TF-Slim checkpoint '
          '(`--labels_offset` on ImageNet) | preprocessing | TF-Slim checkpoint |')
    print('|---|---|---|---|---|---|')
    for name in nets_factory.network_names():
        spec = nets_factory.get_spec(name)
        # The published checkpoint's classes, else the net's own default (slim's).
        classes = (spec.checkpoint_num_classes
                   or inspect.signature(spec.builder).parameters['num_classes'].default)
        shape = 'x'.join(map(str, spec.input_shape()[:-1]))
        convention = (f'{spec.checkpoint_num_classes} ({spec.imagenet_labels_offset})'
                      if spec.checkpoint_num_classes else '-')
        print(f'| `{name}` | {shape} | {parameter_count(spec, classes):,} @ {classes} '
              f'classes | {convention} | {spec.preprocessing_name} | '
              f'{spec.checkpoint_file or "-"} |', flush=True)


if __name__ == '__main__':
    main()
