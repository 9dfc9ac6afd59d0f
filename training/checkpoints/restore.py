"""Restoring a network from a checkpoint by slim variable name.

Two kinds of checkpoint hold a network's weights: TF1 name-based ones (TF-Slim's model
zoo), keyed by variable name, and this toolkit's TF2 object checkpoints, keyed by the
attribute path from the checkpoint's root ('model/conv1/weights/.ATTRIBUTES/...').
Both are read by slim name here, so exclude prefixes mean the same for either.
"""
import dataclasses
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import tensorflow as tf
from absl import logging

from core.errors import UsageError
from core.naming import slim_name
from nets import quantization
from training.checkpoints import integrity

MODEL_KEY = 'model'  # the network's attribute in every checkpoint this toolkit writes
EMA_KEY = 'ema'  # the moving averages' attribute (deployment.moving_averages)
EMA_NAME_SUFFIX = '/ExponentialMovingAverage'  # TF1's shadow names
OBJECT_GRAPH_KEY = '_CHECKPOINTABLE_OBJECT_GRAPH'
_VALUE_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'


def _is_v1_checkpoint(path: str) -> bool:
    """Whether path is one file in TF1's first checkpoint format (no .index), as the
    model zoo's 2016 archives hold (inception_v3.ckpt, resnet_v1_50.ckpt, ...)."""
    if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
        return False
    try:
        tf.train.load_checkpoint(path)
    except (tf.errors.OpError, ValueError):
        return False
    return True


def resolve_checkpoint(path: str, verify: bool = False) -> str:
    """A checkpoint prefix from a prefix or a directory (its newest intact checkpoint,
    with one warning naming any newer damaged one). verify: a prefix must be intact too
    (else one line naming the damage); unverified, reading it names any damage."""
    if tf.io.gfile.isdir(path):
        search = integrity.newest_intact(path)
        if search.intact is None and search.damaged:
            raise search.nothing_intact_error('--checkpoint_path')
        if search.intact is None:
            raise UsageError(f'No checkpoint found in {path}; train first or pass a '
                             f'checkpoint prefix such as {path}/model.ckpt-1000.')
        if search.damaged:
            logging.warning('%s', search.fallback_message('using'))
        return search.intact
    if not tf.io.gfile.exists(path + '.index'):
        if _is_v1_checkpoint(path):  # the 2016 model zoo's single-file .ckpt
            return path
        raise UsageError(f'Checkpoint {path} does not exist (no {path}.index); pass a '
                         f'checkpoint prefix or a directory holding checkpoints.')
    if verify:
        integrity.raise_if_damaged(path)
    return path


def _object_checkpoint_keys(module: tf.Module, use_moving_averages: bool) -> Dict[str, str]:
    """slim name -> key in an object checkpoint whose root holds `module` as 'model'
    (or, for the averages, an ExponentialMovingAverage of module.variables as 'ema')."""
    if use_moving_averages:
        return {slim_name(v): f'{EMA_KEY}/shadows/{i}{_VALUE_SUFFIX}'
                for i, v in enumerate(module.variables)}
    keys = {}
    for path, variable in module._flatten(with_path=True,  # pylint: disable=protected-access
                                          predicate=lambda v: isinstance(v, tf.Variable)):
        keys.setdefault(slim_name(variable),
                        '/'.join([MODEL_KEY, *map(str, path)]) + _VALUE_SUFFIX)
    return keys


def _matches(name: str, prefixes: Iterable[str]) -> bool:
    return any(name.startswith(prefix) for prefix in prefixes)


def _layer_scope(name: str) -> str:
    """The scope a fine-tuner excludes for a variable: its net's first two levels,
    'InceptionV3/AuxLogits/Conv2d_2b_1x1/weights' -> 'InceptionV3/AuxLogits' (slim's
    README convention), 'vgg_16/fc8/weights' -> 'vgg_16/fc8'."""
    return '/'.join(name.split('/')[:-1][:2])


@dataclasses.dataclass
class RestorePlan:
    """What restoring a checkpoint into a network would do, variable by variable."""
    checkpoint_path: str
    restored: List[Tuple[tf.Variable, str]]  # (variable, checkpoint key)
    excluded: List[str]
    missing: List[str]
    mismatched: List[Tuple[str, list, list]]  # (name, checkpoint shape, model shape)
    checkpoint_only: List[str]
    global_step: Optional[int]
    use_moving_averages: bool = False
    # (variable, checkpoint key, checkpoint shape): values of another shape the network
    # fits to its own (a ViT's position embedding on another image size's grid).
    resampled: List[Tuple[tf.Variable, str, list]] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        resampled = ''.join(f' {slim_name(v)} resampled from {shape} to '
                            f'{v.shape.as_list()} (bicubic: this image size\'s grid).'
                            for v, _, shape in self.resampled)
        return (f'Restore from {self.checkpoint_path}: {len(self.restored)} restored, '
                f'{len(self.excluded)} excluded, {len(self.missing)} missing, '
                f'{len(self.mismatched)} shape-mismatched, {len(self.checkpoint_only)} '
                f'only in the checkpoint.{resampled}')

    def describe(self, verbose: bool = True) -> str:
        """The summary line, and with verbose the names under each heading."""
        lines = [self.summary()]
        if verbose:
            sections = [('restored', [slim_name(v) for v, _ in self.restored]),
                        ('excluded', self.excluded), ('missing', self.missing),
                        ('shape-mismatched', [f'{n}: checkpoint {c} vs model {m}'
                                              for n, c, m in self.mismatched]),
                        ('only in the checkpoint', self.checkpoint_only)]
            for title, names in sections:
                lines += [f'  {title} ({len(names)}):'] + [f'    {n}' for n in names]
        return '\n'.join(lines)

    def check(self, ignore_missing_vars: bool = False, fine_tuning: bool = False):
        """Raises the UsageError that names the fix if the restore cannot be done.

        fine_tuning: the job can leave layers out (training), so a new class count is
        fixed by --checkpoint_exclude_scopes; elsewhere only by matching the classes.
        """
        if self.mismatched:
            raise UsageError(self._mismatch_message(fine_tuning))
        # Quantization-aware training may start from a float checkpoint: the first
        # batch sets the activation ranges it lacks.
        missing = [name for name in self.missing if not quantization.is_range(name)]
        if missing and not ignore_missing_vars:
            shown = ', '.join(missing[:5]) + (' ...' if len(missing) > 5 else '')
            what = 'moving averages of ' if self.use_moving_averages else ''
            fix = ('train with --moving_average_decay or evaluate without it'
                   if self.use_moving_averages
                   else 'check --model_name, or pass --ignore_missing_vars')
            raise UsageError(f'Checkpoint {self.checkpoint_path} lacks {len(missing)} '
                             f'{what}the model\'s variables ({shown}); {fix}.')

    def class_counts(self) -> Optional[Tuple[int, int]]:
        """(checkpoint's, model's) class count when only the logits' width differs."""
        checkpoint_classes = {c[-1] for _, c, _ in self.mismatched}
        model_classes = {m[-1] for _, _, m in self.mismatched}
        if self.mismatched and len(checkpoint_classes) == len(model_classes) == 1 and all(
                c[:-1] == m[:-1] for _, c, m in self.mismatched):
            return checkpoint_classes.pop(), model_classes.pop()
        return None

    def image_channels(self) -> Optional[Tuple[int, int]]:
        """(checkpoint's, model's) image channels when only the first convolution's
        input channels differ (--use_grayscale): 1 against 3."""
        if len(self.mismatched) != 1:
            return None
        _, theirs, ours = self.mismatched[0]
        if (len(theirs) in (4, 5) and len(theirs) == len(ours) and theirs[:-2] == ours[:-2]
                and theirs[-1] == ours[-1] and {theirs[-2], ours[-2]} == {1, 3}):
            return theirs[-2], ours[-2]
        return None

    def _mismatch_message(self, fine_tuning: bool) -> str:
        listed = '; '.join(f'{n}: checkpoint {c} vs model {m}'
                           for n, c, m in self.mismatched[:4])
        if len(self.mismatched) > 4:
            listed += f'; and {len(self.mismatched) - 4} more'
        problem = f'Checkpoint {self.checkpoint_path} does not fit the model ({listed})'
        channels = self.image_channels()
        if channels:
            return (f'{problem}: it was trained on images with {channels[0]} channel(s), '
                    f'the model takes {channels[1]}; '
                    + ('pass --use_grayscale.' if channels[0] == 1
                       else 'drop --use_grayscale.'))
        only_classes_differ = self.class_counts() is not None
        model_classes = {m[-1] for _, _, m in self.mismatched}
        checkpoint_classes = {c[-1] for _, c, _ in self.mismatched}
        if not only_classes_differ:
            return (f'{problem}; it was written for another --model_name or network '
                    f'option' + (', or leave these layers out with '
                                 '--checkpoint_exclude_scopes.' if fine_tuning else '.'))
        ours, theirs = model_classes.pop(), checkpoint_classes.pop()
        scopes = ','.join(dict.fromkeys(_layer_scope(n) for n, _, _ in self.mismatched))
        message = f'{problem}: the checkpoint has {theirs} classes, the model {ours}'
        message += (f'. To fine-tune on the new classes pass '
                    f'--checkpoint_exclude_scopes={scopes}' if fine_tuning else
                    ' (the dataset\'s classes minus --labels_offset). Use the dataset the '
                    'checkpoint was trained on')
        if theirs - ours == 1:
            message += ('; to use its classes as they are, pass --labels_offset=0 (it '
                        'keeps the background class 0)')
        elif ours - theirs == 1:
            message += ('; to use its classes as they are, pass --labels_offset=1 (it '
                        'has no background class: VGG and ResNet v1 checkpoints)')
        return message + '.'


def _checkpoint_step(reader, available, object_based) -> Optional[int]:
    step_key = 'global_step' + (_VALUE_SUFFIX if object_based else '')
    return int(reader.get_tensor(step_key)) if step_key in available else None


def _resamples(network, variable, checkpoint_path: str, key: str) -> bool:
    """Whether the network fits the checkpoint's value of another shape to the
    variable (its `resample_restored`, e.g. a ViT's position embedding)."""
    resample = getattr(network, 'resample_restored', None)
    if resample is None:
        return False
    with integrity.naming_damage(checkpoint_path):
        value = tf.train.load_checkpoint(checkpoint_path).get_tensor(key)
    return resample(variable, value) is not None


def plan_restore(network: tf.Module, checkpoint_path: str, *,
                 exclude_scopes: Sequence[str] = (),
                 use_moving_averages: bool = False,
                 resample: bool = False) -> RestorePlan:
    """Matches the network's variables with a checkpoint's by slim name; assigns nothing.

    An exclude scope that matches none of the network's variables is an error (a typo
    would otherwise restore the layers it meant to leave out). resample: a value of
    another shape that the network can fit (`resample_restored`) is planned as
    resampled, not mismatched (fine-tuning, evaluation, export at another image size).
    """
    checkpoint_path = resolve_checkpoint(checkpoint_path)
    with integrity.naming_damage(checkpoint_path):
        reader = tf.train.load_checkpoint(checkpoint_path)
        available = reader.get_variable_to_shape_map()
        object_based = OBJECT_GRAPH_KEY in available
        global_step = _checkpoint_step(reader, available, object_based)
    if object_based:
        keys = _object_checkpoint_keys(network, use_moving_averages)
    else:
        suffix = EMA_NAME_SUFFIX if use_moving_averages else ''
        keys = {slim_name(v): slim_name(v) + suffix for v in network.variables}
    names = [slim_name(v) for v in network.variables]
    unmatched = [s for s in exclude_scopes if not any(n.startswith(s) for n in names)]
    if unmatched:
        tops = ', '.join(dict.fromkeys(_layer_scope(n) for n in names))
        raise UsageError(f'--checkpoint_exclude_scopes {",".join(unmatched)} matches no '
                         f'variable of the model; its scopes are: {tops}.')
    plan = RestorePlan(checkpoint_path, [], [], [], [], [], global_step, use_moving_averages)
    for variable, name in zip(network.variables, names):
        key = keys[name]
        if _matches(name, exclude_scopes):
            plan.excluded.append(name)
        elif key not in available:
            plan.missing.append(name)
        elif list(available[key]) != variable.shape.as_list():
            if resample and _resamples(network, variable, checkpoint_path, key):
                plan.resampled.append((variable, key, list(available[key])))
            else:
                plan.mismatched.append((name, list(available[key]),
                                        variable.shape.as_list()))
        else:
            plan.restored.append((variable, key))
    used = set(keys.values())
    plan.checkpoint_only = sorted(
        key for key in available if key not in used and _is_model_key(key, object_based))
    return plan


def _is_model_key(key: str, object_based: bool) -> bool:
    """Whether a checkpoint key holds network weights (not a step, slot or average)."""
    if object_based:
        return key.startswith(MODEL_KEY + '/') and key.endswith(_VALUE_SUFFIX)
    return key != 'global_step' and not key.endswith(EMA_NAME_SUFFIX) and not any(
        key.endswith('/' + slot) for slot in _TF1_SLOT_NAMES)


# Optimizer slots TF1 optimizers saved next to each variable ('<var>/Momentum').
_TF1_SLOT_NAMES = ('Momentum', 'RMSProp', 'RMSProp_1', 'Adam', 'Adam_1', 'Adagrad',
                   'Adadelta', 'Adadelta_1', 'Ftrl', 'Ftrl_1')


def restore_network(network: tf.Module, checkpoint_path: str, *,
                    exclude_scopes: Sequence[str] = (),
                    ignore_missing_vars: bool = False,
                    use_moving_averages: bool = False,
                    fine_tuning: bool = False) -> Optional[int]:
    """Assigns the network's variables from a checkpoint; returns its global step if known.

    Variables under an excluded scope keep their values. Missing variables are an error
    unless ignore_missing_vars; shape mismatches are always an error, listed together,
    with the exact --checkpoint_exclude_scopes or --labels_offset when only the class
    count differs; a value the network fits to its variable (a ViT's position embedding
    on another image size's grid) is resampled, and the report says so. With
    use_moving_averages, each variable takes its exponential moving average (slim's
    --moving_average_decay at evaluation). fine_tuning: see RestorePlan.check. The report's counts are logged; with -v 1 the names too.
    """
    plan = plan_restore(network, checkpoint_path, exclude_scopes=exclude_scopes,
                        use_moving_averages=use_moving_averages, resample=True)
    logging.info('%s', plan.summary())
    logging.vlog(1, '%s', plan.describe(verbose=True))
    plan.check(ignore_missing_vars, fine_tuning)
    for name in plan.missing:
        logging.warning('Variable %s is not in %s; keeping its initial value.', name,
                        plan.checkpoint_path)
    with integrity.naming_damage(plan.checkpoint_path):
        reader = tf.train.load_checkpoint(plan.checkpoint_path)
        for variable, key in plan.restored:
            variable.assign(reader.get_tensor(key))
        for variable, key, _ in plan.resampled:
            variable.assign(network.resample_restored(variable, reader.get_tensor(key)))
    return plan.global_step
