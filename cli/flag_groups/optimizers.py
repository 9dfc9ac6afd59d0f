"""Flag group of the optimizers beyond TF-Slim's seven (issue 43): Modern optimizers.

Each hyper-parameter is its reference's argument (Keras 3's AdamW, Lamb, Lion, Muon;
Model Garden's LARS) after the optimizer's name, with the reference's default; another
--optimizer refuses it.
"""
from absl import flags

from training.recipes.optimizers import OptimizerConfig as Config

# The flags belong to the script calling cli.flags.define(): absl files them under it, so
# its --helpfull and its flags.txt (cli.run_record) list them.
flags.disclaim_key_flags()

_DECAY = ('Decoupled weight decay of {}: before each update, var -= learning_rate * '
          'this * var (Loshchilov & Hutter, as PyTorch and Keras), on the variables '
          '--weight_decay_exclude keeps.')


def _adam_like(define, name, reference):
    define.float(f'{name}_beta_1', getattr(Config, f'{name}_beta_1'), f'{reference}\'s '
                 'decay rate of the 1st moment estimates.')
    define.float(f'{name}_beta_2', getattr(Config, f'{name}_beta_2'), f'{reference}\'s '
                 'decay rate of the 2nd moment estimates.')
    define.float(f'{name}_epsilon', getattr(Config, f'{name}_epsilon'), f'{reference}\'s '
                 'epsilon, added to the square root of the 2nd moment (Keras\'s).')
    define.float(f'{name}_weight_decay', getattr(Config, f'{name}_weight_decay'),
                 _DECAY.format(name))


def modern_optimizers(define):
    """adamw, lamb, lars, lion and muon (training.recipes.decoupled_optimizers)."""
    define.string('weight_decay_exclude', Config.weight_decay_exclude, 'Variables the '
                  'decoupled decay of adamw, lamb, lion, muon (and LARS\'s decay and trust '
                  'ratio) leaves alone: a comma-separated list of norms (norm scales and '
                  'offsets), biases, embeddings (position embeddings, class and register '
                  'tokens), layer_scales, or none. Default: all four, as the references\' '
                  'recipes (timm skips every 1-D parameter); a '
                  'category named here must match a variable. TF-Slim\'s L2 '
                  '--weight_decay is another decay: in the loss, on the nets\' weights.')
    _adam_like(define, 'adamw', 'AdamW')
    _adam_like(define, 'lamb', 'LAMB')
    define.float('lars_momentum', Config.lars_momentum, 'LARS\'s momentum.')
    define.float('lars_eeta', Config.lars_eeta, 'LARS\'s trust coefficient: a '
                 'variable\'s rate is learning_rate * eeta * |var| / |grad|.')
    define.float('lars_weight_decay_rate', Config.lars_weight_decay_rate, 'LARS\'s weight '
                 'decay, added to the gradient (grad += rate * var) before the trust ratio.')
    define.bool('lars_nesterov', Config.lars_nesterov, 'LARS with Nesterov momentum.')
    define.bool('lars_classic_momentum', Config.lars_classic_momentum, 'LARS\'s classic '
                'momentum: the scaled rate enters the momentum; '
                '--nolars_classic_momentum scales the momentum\'s step instead.')
    define.float('lion_beta_1', Config.lion_beta_1, 'Lion\'s interpolation of momentum '
                 'and gradient whose sign is the step.')
    define.float('lion_beta_2', Config.lion_beta_2, 'Lion\'s momentum decay.')
    define.float('lion_weight_decay', Config.lion_weight_decay, _DECAY.format('lion'))
    define.float('muon_momentum', Config.muon_momentum, 'Muon\'s momentum (2-D variables).')
    define.integer('muon_ns_steps', Config.muon_ns_steps, 'Newton-Schulz iterations that '
                   'orthogonalise Muon\'s step.')
    define.bool('muon_nesterov', Config.muon_nesterov, 'Muon with Nesterov momentum.')
    for coefficient in 'abc':
        define.float(f'muon_{coefficient}', getattr(Config, f'muon_{coefficient}'),
                     f'Newton-Schulz coefficient {coefficient} (keep the default).')
    define.float('muon_rms_rate', Config.muon_rms_rate, 'Muon\'s step times sqrt(max(rows, '
                 'columns)) * this (Liu et al. 2025), to match AdamW\'s scale; 0: off.')
    define.float('muon_adam_beta_1', Config.muon_adam_beta_1, 'Decay rate of the 1st '
                 'moments of the AdamW step Muon takes for variables that are not 2-D.')
    define.float('muon_adam_beta_2', Config.muon_adam_beta_2, 'The same, 2nd moments.')
    define.float('muon_epsilon', Config.muon_epsilon, 'Epsilon of Muon\'s AdamW step.')
    define.float('muon_adam_lr_ratio', Config.muon_adam_lr_ratio, 'The AdamW step\'s '
                 'learning rate, as a fraction of --learning_rate.')
    define.float('muon_weight_decay', Config.muon_weight_decay, _DECAY.format('muon\'s 2-D '
                 'variables'))
    define.float('muon_adam_weight_decay', Config.muon_adam_weight_decay,
                 _DECAY.format('the variables muon steps with AdamW'))
    define.string('muon_exclude_layers', Config.muon_exclude_layers, 'Comma-separated '
                  'regular expressions: 2-D variables whose names match one take the AdamW '
                  'step (e.g. the logits layer).')
    define.bool('muon_exclude_embeddings', Config.muon_exclude_embeddings, 'Variables '
                'named *embedding* take the AdamW step.')
