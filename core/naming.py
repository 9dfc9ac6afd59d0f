"""Variable names as TF-Slim wrote them: the name without the ':0' output suffix."""


def slim_name(variable) -> str:
    """'InceptionV3/Conv2d_1a_3x3/weights:0' -> 'InceptionV3/Conv2d_1a_3x3/weights'."""
    return variable.name[:-2] if variable.name.endswith(':0') else variable.name
