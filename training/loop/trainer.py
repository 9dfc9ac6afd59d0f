"""Training, assembled: the model step (training.loop.model_step), the deployment plan's
inner loop (deployment.plan: `train_n_steps(n)` for every mode), the checkpoint and
restore, and the outer controller (training.loop.controller) with its actions
(training.loop.actions). Nothing here depends on the distribution mode.
"""
from typing import Callable, Dict, Optional

import tensorflow as tf
from absl import logging

from core.errors import UsageError, tensorflow_reason
from deployment import plan as plan_lib
from training.checkpoints import integrity
from training.checkpoints import restore as restore_lib
from training.checkpoints import resume
from training.loop import controller
from training.recipes import gradient_accumulation, optimizers
from training.loop import actions as actions_lib
from training.loop import rollback as rollback_lib
from training.summaries import train_summaries
from training.loop.model_step import ModelStep, select_trainable  # noqa: F401  (public)
from training.loop.train_config import TrainConfig  # noqa: F401  (public)


# The input position's checkpoint key. Positions saved under the former key
# (`input_iterator`, before examples were numbered for their augmentation seeds) do not
# fit today's pipeline: left unread, so such a run resumes on a fresh shuffle.
INPUT_POSITION_KEY = 'input_position'


class Trainer:
    """Trains `network` with `optimizer` on batches from `input_fn` as `plan` deploys it
    (or, for tests and benchmarks, under `strategy` in this process).

    network, optimizer and the variables they create must be made under the strategy's
    scope; the Trainer builds both there before the first step.
    """

    def __init__(self, *, network, optimizer, learning_rate_fn: Callable,
                 input_fn: Callable, image_shape, config: TrainConfig,
                 plan: Optional[plan_lib.DeploymentPlan] = None,
                 strategy: Optional[tf.distribute.Strategy] = None):
        if (plan is None) == (strategy is None):
            raise ValueError('Pass a deployment plan or a strategy, not both.')
        self.plan = plan or plan_lib.for_strategy(strategy)
        self.strategy = self.plan.strategy
        self.config = config
        gradient_accumulation.check_deployment(config.gradient_accumulation_steps,
                                               self.plan.replicas_to_aggregate is not None)
        gradient_accumulation.configure_graph_optimizer(config.gradient_accumulation_steps)
        # With gradient accumulation, one input element is one update's micro-batches.
        self.input_fn = gradient_accumulation.stack_micro_batches(
            input_fn, config.gradient_accumulation_steps)
        if config.jit_compile and not self.plan.single_device:
            raise UsageError(f'--jit_compile works on one device only, not under '
                             f'{type(self.strategy).__name__} with '
                             f'{self.strategy.num_replicas_in_sync} replica(s); drop '
                             '--jit_compile.')
        self.model_step = ModelStep(
            strategy=self.strategy, network=network, optimizer=optimizer,
            learning_rate_fn=learning_rate_fn, image_shape=image_shape, config=config,
            with_random_generator=self.plan.steps_share_one_generator)
        state = {restore_lib.MODEL_KEY: network, **self.model_step.checkpointed()}
        self.checkpoint = tf.train.Checkpoint(**state)
        # What a divergence rollback restores: all but the input position (joined later).
        self.rollback_checkpoint = tf.train.Checkpoint(**state)
        self._manage_checkpoints()
        # Built when training starts, after the restore, and kept for the Trainer's life:
        # a later train() continues the same stream, and destroying a distributed
        # iterator can stall (see cli.guard.exit_now).
        self.steps = None
        self.traced_steps = []  # steps whose trace was taken, for the record

    network = property(lambda self: self.model_step.network)
    optimizer = property(lambda self: self.model_step.optimizer)
    global_step = property(lambda self: self.model_step.global_step)
    moving_averages = property(lambda self: self.model_step.moving_averages)
    loss_scale = property(lambda self: self.model_step.loss_scale)
    is_chief = property(lambda self: self.plan.is_chief)

    def _manage_checkpoints(self):
        """A CheckpointManager (which reads the train_dir's checkpoint state file once,
        here) and the saver using it."""
        config = self.config
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, config.train_dir, max_to_keep=config.max_checkpoints_to_keep,
            checkpoint_name='model.ckpt', step_counter=self.global_step)
        self.saver = actions_lib.CheckpointSaver(self.manager, config.train_dir)

    def run_steps(self, num_steps: int):
        """Trains num_steps steps in one call of the inner loop; returns its result
        (metrics as floats, first images)."""
        self._attach_input()
        return self.steps.train_n_steps(num_steps)

    def inner_loop(self, input_fn: Callable):
        """Another inner loop of this model step, reading input_fn as the Trainer reads
        its own (gradient accumulation included); training.benchmark times it."""
        return self.plan.inner_loop(
            self.model_step, gradient_accumulation.stack_micro_batches(
                input_fn, self.config.gradient_accumulation_steps),
            jit_compile=self.config.jit_compile)

    def _restore_or_initialize(self) -> int:
        config = self.config
        if self.is_chief:  # before this run saves anything: a killed save's leftovers
            resume.remove_stale_temporaries(config.train_dir)
        latest = self._newest_intact_checkpoint()
        if latest:
            slots = getattr(self.model_step.optimizer, 'SLOTS', None)
            resume.check_resume_fits(
                latest, config.train_dir, self.network,
                optimizer_slots=None if slots is None else [key for key, _ in slots],
                has_moving_averages=self.moving_averages is not None,
                slots_by_optimizer=optimizers.slots_by_optimizer())
            try:
                self.checkpoint.restore(latest).assert_existing_objects_matched()
            except (AssertionError, ValueError, tf.errors.OpError) as error:
                if isinstance(error, tf.errors.OpError):
                    integrity.raise_if_damaged(latest)
                raise UsageError(f'--train_dir={config.train_dir} holds {latest}, '
                                 f'which does not fit this run ({tensorflow_reason(error)}); '
                                 f'pass the flags it was trained with, or a new --train_dir '
                                 f'to start afresh.') from None
            logging.info('Resumed from %s at step %d.', latest, int(self.global_step.numpy()))
        elif config.checkpoint_path:
            restore_lib.restore_network(
                self.network, config.checkpoint_path,
                exclude_scopes=config.checkpoint_exclude_scopes,
                ignore_missing_vars=config.ignore_missing_vars, fine_tuning=True)
        return int(self.global_step.numpy())

    def _newest_intact_checkpoint(self) -> Optional[str]:
        """The checkpoint to resume from: the newest intact one. Newer damaged ones are
        named in one warning and, on the chief, dropped from the checkpoint state file
        (their files stay)."""
        search = integrity.newest_intact(self.config.train_dir, unlisted=True)
        if search.intact is None and search.damaged:
            raise search.nothing_intact_error('--train_dir')
        if search.damaged:
            logging.warning('%s', search.fallback_message(
                'resuming from', kept='stay in place (a later save of the same step '
                f'moves them into {integrity.DAMAGED_DIR}/ first)'))
        if self.is_chief and search.intact and integrity.repair_state(search):
            self._manage_checkpoints()  # so the manager reads the repaired state
        return search.intact

    def save_now(self):
        """Saves at the step reached (the chief), e.g. before the job stops on a data
        error."""
        if self.is_chief:
            self.saver.save(int(self.global_step.numpy()))

    def train(self) -> Dict[str, float]:
        """Runs until --max_number_of_steps (or forever); returns the last metrics."""
        config = self.config
        step = self._restore_or_initialize()
        max_steps = config.max_number_of_steps
        if max_steps is not None and step >= max_steps:
            logging.info('Checkpoint is at step %d >= --max_number_of_steps=%d; nothing '
                         'to train.', step, max_steps)
            return {}
        self._attach_input()
        pace = controller.Pace(config.steps_per_loop, config.log_every_n_steps, max_steps)
        current_step = lambda: int(self.global_step.numpy())  # noqa: E731
        rollback = rollback_lib.for_plan(self.plan, config, self.steps.train_n_steps,
                                         self.rollback_checkpoint, current_step,
                                         self.model_step.train_variables)
        actions = [actions_lib.WarnSkippedExamples(),
                   *([] if rollback else [actions_lib.CheckDivergence(
                       self.manager, config.loss_upper_bound)]),
                   actions_lib.LogLine(pace, self.plan.examples_per_update(
                       config.batch_size) * config.gradient_accumulation_steps)]
        trace = None
        if self.is_chief:
            actions += [
                train_summaries.WriteSummaries(
                    tf.summary.create_file_writer(config.train_dir),
                    config.save_summaries_secs, config.num_image_summaries, pace,
                    network=self.network, capture=self.model_step.summary_capture,
                    strategy=self.strategy),
                actions_lib.SaveCheckpoints(self.saver, config.save_interval_secs)]
            if config.trace_every_n_steps:
                trace = actions_lib.TraceSteps(config.trace_every_n_steps, step,
                                                 config.train_dir, self.plan.task_addresses)
                self.traced_steps = trace.traced_steps
        loop = controller.Controller(
            train_n_steps=rollback or self.steps.train_n_steps,
            current_step=current_step, pace=pace,
            agree=self.plan.agree, actions=actions, trace=trace,
            grace_secs=self.plan.config.preemption_grace_secs,
            leave_together=self.plan.leave_together)
        # A task dying between calls (a ps while the chief reads global_step or saves)
        # ends in the same one line as during a call.
        with self.steps.runner.failures_named():
            _, result = loop.run(step)
        return result.metrics if result is not None else {}

    def _attach_input(self):
        """Creates the input and the inner loop, and checkpoints the input's position
        where the plan can: on one host (one device or clones) the iterator joins the
        checkpoint; in a multi-worker all-reduce each worker saves its own beside the
        chief's checkpoints (deployment.input_positions). A resumed run reads on from
        where the checkpoint was written."""
        if self.steps is not None:
            return
        keep_position = self.config.checkpoint_input_position
        self.steps = self.plan.inner_loop(self.model_step, self.input_fn,
                                          jit_compile=self.config.jit_compile,
                                          checkpointable_input=keep_position)
        # The inner loop's own checkpointed state (sync replicas' update counters),
        # restored here from the checkpoint restored above, if it holds it.
        for key, state in getattr(self.steps, 'checkpointed', dict)().items():
            setattr(self.checkpoint, key, state)
        if not keep_position:
            logging.info('The input position is not checkpointed '
                         '(--nocheckpoint_input_position): a resumed run reads a fresh '
                         'shuffle of the data.')
            return
        if self.plan.worker_input_positions(
                self.steps, train_dir=self.config.train_dir,
                latest_checkpoint=lambda: self.manager.latest_checkpoint,
                final_step=self.config.max_number_of_steps) is not None:
            return
        iterator = self.steps.runner.checkpointable_iterator()
        if iterator is None:
            logging.info('The input position is not checkpointed under %s: a resumed run '
                         'reads a fresh shuffle of the data.', type(self.strategy).__name__)
            return
        try:
            # Restores the position saved with the checkpoint restored above, if any.
            setattr(self.checkpoint, INPUT_POSITION_KEY, iterator)
        except (tf.errors.OpError, ValueError) as error:
            detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
            logging.warning('The checkpoint\'s input position does not fit this input '
                            '(%s); reading a fresh shuffle of the data, and not '
                            'checkpointing the position in this run.', detail[:200])
