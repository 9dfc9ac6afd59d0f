"""The one table of preprocessing functions, keyed by family (inception, vgg, cifarnet,
lenet); each module registers itself. Which family a network uses is part of the
network's registered spec (nets.registry), not of this table."""

_PREPROCESS_FNS = {}


def register(family):
    """Decorator that registers a module's `preprocess_image` under its family name."""
    def decorator(preprocess_image):
        if family in _PREPROCESS_FNS:
            raise ValueError(f"Preprocessing name {family!r} is registered twice.")
        _PREPROCESS_FNS[family] = preprocess_image
        return preprocess_image
    return decorator


def lookup(name):
    """The `preprocess_image` registered under `name`, or None."""
    return _PREPROCESS_FNS.get(name)


def registered_names():
    """All registered names, sorted."""
    return sorted(_PREPROCESS_FNS)
