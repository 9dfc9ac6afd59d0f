"""Errors a user must see as one line: mistakes they can fix (bad flag, missing data,
unknown name) and a run that diverged.

Scripts catch them and print the message as a single line, without a traceback, so
every message must be one sentence that names the fix.
"""
import re
from typing import Optional


class UsageError(ValueError):
    """A problem in the user's input, with a message that says how to fix it."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message names the step and what to do."""


class DataError(UsageError):
    """Input data that stops a job (no examples, labels out of range, a broken labels.txt);
    the message names the file and the fix."""


class SaveFailed(UsageError):
    """A checkpoint could not be written (disk full, I/O error); the message names the
    complete checkpoint that stays the latest, and what to free or change."""


class ClusterTaskFailed(RuntimeError):
    """A task of the training cluster stopped answering; the message names it and how
    to resume."""


def tensorflow_reason(error: BaseException) -> str:
    """The first line of a TensorFlow error without its "{{function_node ...}}" and
    "[Op:...]" fragments, e.g. '/t/x_temp/part-0; No space left on device'."""
    text = getattr(error, 'message', None) or str(error)
    text = re.sub(r'\{\{[^}]*\}\}|\[Op:\w+\]', '', text).strip()
    return (text.splitlines() or [type(error).__name__])[0].strip()


# What TensorFlow says when a layer's window is larger than what reaches it (the last:
# oneDNN's pooling kernel, measured for lenet at 2x2).
_SHRUNK_BELOW_ONE_PIXEL = re.compile(
    r'Negative dimension size caused by|Computed output size would be negative'
    r'|could not create a descriptor for a pooling forward propagation primitive')


def input_too_small_message(error: BaseException) -> Optional[str]:
    """The one line for images too small for a network's layers, or None for others."""
    if not _SHRUNK_BELOW_ONE_PIXEL.search(str(error)):
        return None
    return ('The images are too small for this network: a layer would shrink them below '
            'one pixel. Raise --train_image_size (--eval_image_size in evaluation, '
            '--image_size in export), e.g. to the network\'s default size listed in '
            'docs/reference/models.md.')
