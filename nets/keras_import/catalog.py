"""The one list of family mapping modules; importing this registers every counterpart.

A family adds its module here (one line) and nowhere else.
"""
from nets.keras_import import convnext  # noqa: F401  (imported to register)
from nets.keras_import import efficientnet, efficientnet_v2  # noqa: F401
from nets.keras_import import slim_nets  # noqa: F401  (imported to register)
from nets.keras_import.counterparts import get, names  # noqa: F401
