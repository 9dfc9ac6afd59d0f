"""Looks up a preprocessing function by family, as TF-Slim's preprocessing_factory did by
network name (a network's family is in its spec: nets_factory.get_spec(name))."""
from core.errors import UsageError
from preprocessing import registry

# Imported for their side effect: each module registers itself under its names.
from preprocessing import cifarnet_preprocessing  # noqa: F401
from preprocessing import inception_preprocessing  # noqa: F401
from preprocessing import lenet_preprocessing  # noqa: F401
from preprocessing import vgg_preprocessing  # noqa: F401


def available_names():
    """Every name `get_preprocessing` accepts, sorted."""
    return registry.registered_names()


def is_available(name):
    """Whether `get_preprocessing(name)` would succeed."""
    return registry.lookup(name) is not None


def get_preprocessing(name, is_training=False, use_grayscale=False):
    """Returns `fn(image, output_height, output_width, **kwargs)` for family `name`.

    `fn` takes a uint8 HWC image and returns float32 [output_height, output_width, C];
    C is 1 when `use_grayscale` is set. Extra kwargs go to the module's preprocess_image.
    """
    preprocess_image = registry.lookup(name)
    if preprocess_image is None:
        raise UsageError(f"Unknown preprocessing name {name!r}; use one of "
                         f"{', '.join(available_names())}, or a model name.")

    def preprocessing_fn(image, output_height, output_width, **kwargs):
        return preprocess_image(image, output_height, output_width,
                                is_training=is_training, use_grayscale=use_grayscale,
                                **kwargs)

    return preprocessing_fn
