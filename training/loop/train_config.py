"""TrainConfig: how a training runs (its loop, checkpoints, precision), checked up front."""
import dataclasses
from typing import Optional, Sequence

from core import checks, paths
from core.errors import UsageError
from nets import precision as precision_lib
from training.recipes.batch_mixing import MixingConfig
from training.recipes.distillation import DistillationConfig


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    train_dir: str
    batch_size: int  # per clone, as slim's --batch_size
    max_number_of_steps: Optional[int] = None
    log_every_n_steps: int = 10
    save_interval_secs: float = 600
    save_summaries_secs: float = 600
    max_checkpoints_to_keep: int = 5
    label_smoothing: float = 0.0
    checkpoint_path: Optional[str] = None
    checkpoint_exclude_scopes: Sequence[str] = ()
    trainable_scopes: Sequence[str] = ()
    ignore_missing_vars: bool = False
    moving_average_decay: Optional[float] = None
    num_image_summaries: int = 3
    # Steps per call of the compiled loop, at most: calls also end at log lines, at the
    # last step, and after about 2 s (training.loop.controller.MAX_SECONDS_PER_CALL).
    steps_per_loop: int = 100
    precision: str = 'float32'
    jit_compile: bool = False
    # On one device the input position (and the shuffle buffer's records) joins the
    # checkpoint, for an exact resume.
    checkpoint_input_position: bool = True
    # A profiler trace of one step every this many steps (TF1's FULL_TRACE); None: off.
    trace_every_n_steps: Optional[int] = None
    # Mixup and cutmix of training batches (training.recipes.batch_mixing); off by default.
    mixing: MixingConfig = MixingConfig()
    # Micro-batches of batch_size per update (training.recipes.gradient_accumulation).
    gradient_accumulation_steps: int = 1
    # A frozen teacher's soft targets beside the labels (training.recipes.distillation); off.
    distillation: DistillationConfig = DistillationConfig()
    # Rollbacks to the last good checkpoint on a diverged loss before training stops
    # (training.loop.rollback); 0: stop at the first diverged loss.
    divergence_retries: int = 3
    # A loss above this counts as diverged, as a non-finite one does (Model Garden's
    # loss_upper_bound default).
    loss_upper_bound: float = 1e6

    def __post_init__(self):
        if self.batch_size < 1:
            raise UsageError(f'--batch_size must be at least 1, got {self.batch_size}.')
        if self.log_every_n_steps < 1:
            raise UsageError('--log_every_n_steps must be at least 1.')
        if self.max_number_of_steps is not None and self.max_number_of_steps < 1:
            raise UsageError('--max_number_of_steps must be at least 1 when set.')
        if not 0.0 <= self.label_smoothing < 1.0:
            raise UsageError('--label_smoothing must be in [0, 1).')
        checks.check_at_least(1, unset='off', trace_every_n_steps=self.trace_every_n_steps)
        if self.steps_per_loop < 1:
            raise UsageError(f'--steps_per_loop={self.steps_per_loop} is out of range; pass '
                             'at least 1.')
        if self.precision not in precision_lib.PRECISIONS:
            raise UsageError(f'--precision={self.precision} is not one of '
                             f'{", ".join(precision_lib.PRECISIONS)}.')
        if self.moving_average_decay is not None and not 0 < self.moving_average_decay < 1:
            raise UsageError('--moving_average_decay must be in (0, 1), e.g. 0.9999.')
        checks.check_at_least(0, save_interval_secs=self.save_interval_secs,
                              save_summaries_secs=self.save_summaries_secs)
        checks.check_at_least(0, divergence_retries=self.divergence_retries)
        if not self.loss_upper_bound > 0:
            raise UsageError(f'--loss_upper_bound={self.loss_upper_bound} is out of range; '
                             'pass a positive bound, e.g. 1e6.')
        checks.check_at_least(1, max_checkpoints_to_keep=self.max_checkpoints_to_keep,
                              gradient_accumulation_steps=self.gradient_accumulation_steps)
        if self.jit_compile and self.mixing.enabled:
            raise UsageError('XLA cannot compile the Beta draws of --mixup_alpha and '
                             '--cutmix_alpha (a stateless gamma op); drop --jit_compile.')
        paths.check_output_dir(self.train_dir, '--train_dir')
