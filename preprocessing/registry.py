"""The one table of preprocessing functions; each module registers itself under its names."""

_PREPROCESS_FNS = {}


def register(*names):
    """Decorator that registers a module's `preprocess_image` under `names`."""
    def decorator(preprocess_image):
        for name in names:
            if name in _PREPROCESS_FNS:
                raise ValueError(f"Preprocessing name {name!r} is registered twice.")
            _PREPROCESS_FNS[name] = preprocess_image
        return preprocess_image
    return decorator


def lookup(name):
    """The `preprocess_image` registered under `name`, or None."""
    return _PREPROCESS_FNS.get(name)


def registered_names():
    """All registered names, sorted."""
    return sorted(_PREPROCESS_FNS)
