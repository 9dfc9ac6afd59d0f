"""Looks up a preprocessing function by family, as TF-Slim's preprocessing_factory did by
network name (a network's family is in its spec: nets_factory.get_spec(name))."""
from core.errors import UsageError
from preprocessing import augment_policies
from preprocessing import random_draws
from preprocessing import random_erasing
from preprocessing import registry

# Imported for their side effect: each module registers itself under its names.
from preprocessing import cifarnet_preprocessing  # noqa: F401
from preprocessing import convnext_preprocessing  # noqa: F401
from preprocessing import efficientnet_preprocessing  # noqa: F401
from preprocessing import efficientnet_v2_preprocessing  # noqa: F401
from preprocessing import inception_preprocessing  # noqa: F401
from preprocessing import lenet_preprocessing  # noqa: F401
from preprocessing import mobilenet_v4_preprocessing  # noqa: F401
from preprocessing import vgg_preprocessing  # noqa: F401
from preprocessing import vit_preprocessing  # noqa: F401


def available_names():
    """Every name `get_preprocessing` accepts, sorted."""
    return registry.registered_names()


def is_available(name):
    """Whether `get_preprocessing(name)` would succeed."""
    return registry.lookup(name) is not None


def get_preprocessing(name, is_training=False, use_grayscale=False, augmentation=None):
    """Returns `fn(image, output_height, output_width, **kwargs)` for family `name`.

    `fn` takes a uint8 HWC image and returns float32 [output_height, output_width, C];
    C is 1 when `use_grayscale` is set. Extra kwargs go to the module's preprocess_image.
    `augmentation` (an augment_policies.AugmentationConfig) adds its policy and random
    erasing to training; evaluation ignores it.
    """
    preprocess_image = registry.lookup(name)
    if preprocess_image is None:
        raise UsageError(f"Unknown preprocessing name {name!r}; use one of "
                         f"{', '.join(available_names())}, or a model name.")
    if is_training and augmentation is not None and augmentation.changes_training:
        return _augmented(preprocess_image, use_grayscale, augmentation)

    def preprocessing_fn(image, output_height, output_width, **kwargs):
        return preprocess_image(image, output_height, output_width,
                                is_training=is_training, use_grayscale=use_grayscale,
                                **kwargs)

    return preprocessing_fn


def _augmented(preprocess_image, use_grayscale, augmentation):
    """The family's training preprocessing with augmentation's policy inside it (on the
    uint8 image, after crop and flip) and random erasing after it (on the normalised one).

    The example's seed is split three ways: the family's own draws, the policy's, the
    erasing's.
    """
    policy = augment_policies.policy_fn(augmentation)

    def preprocessing_fn(image, output_height, output_width, seed=None, **kwargs):
        family_seed, policy_seed, erase_seed = random_draws.split(seed, 3)
        if policy is not None:
            kwargs['augment'] = lambda pixels: policy(pixels, policy_seed)
        image = preprocess_image(image, output_height, output_width, is_training=True,
                                 use_grayscale=use_grayscale, seed=family_seed, **kwargs)
        if augmentation.random_erase_prob > 0:
            image = random_erasing.erase(image, augmentation.random_erase_prob, erase_seed)
        return image

    return preprocessing_fn
