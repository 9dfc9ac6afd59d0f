"""The checkpoint-averaging job: average_checkpoints.py's flags, to one library call."""
import dataclasses
from typing import Optional, Tuple

from core import checks
from core.errors import UsageError
from training.checkpoints import averaging as averaging_lib


@dataclasses.dataclass(frozen=True)
class AveragingJob:
    """Which checkpoints to average (the newest of a directory, or those named), and
    where the result goes."""
    output_dir: Optional[str]
    checkpoint_dir: Optional[str] = None
    checkpoint_prefixes: Tuple[str, ...] = ()
    num_checkpoints: int = 5
    overwrite: bool = False

    def __post_init__(self):
        if bool(self.checkpoint_dir) == bool(self.checkpoint_prefixes):
            raise UsageError('Pass --checkpoint_dir=<train_dir> (its newest '
                             '--num_checkpoints checkpoints are averaged) or '
                             '--checkpoint_prefixes=<prefix>,<prefix>,..., not both.'
                             if self.checkpoint_dir else
                             'Nothing to average; pass --checkpoint_dir=<train_dir> or '
                             '--checkpoint_prefixes=<prefix>,<prefix>,...')
        checks.check_at_least(2, num_checkpoints=self.num_checkpoints)
        if not self.output_dir:
            raise UsageError('Pass --output_dir, the directory for the averaged checkpoint '
                             '(e.g. <train_dir>/averaged).')


def run(job: AveragingJob) -> averaging_lib.Averaged:
    """Averages and prints where the new checkpoint is and how to use it."""
    prefixes = (list(job.checkpoint_prefixes) or
                averaging_lib.newest_intact(job.checkpoint_dir, job.num_checkpoints))
    result = averaging_lib.average(prefixes, job.output_dir, overwrite=job.overwrite)
    steps = ', '.join('?' if step is None else str(step) for step in result.steps)
    print(f'Averaged {len(result.sources)} checkpoints (steps {steps}): '
          f'{result.num_averaged} variables averaged, {result.num_copied} other tensors '
          f'copied from the newest. Wrote {result.prefix}; evaluate or export it with '
          f'--checkpoint_path={job.output_dir}.', flush=True)
    return result
