r"""Prints README's flag table of one script: every flag it takes, shared ones included.

  .venv/bin/python scripts/flag_table.py train_image_classifier.py
"""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
PROJECT_PACKAGES = {'cli', 'core', 'datasets', 'deployment', 'export', 'nets',
                    'preprocessing', 'training'}


def main(script):
    spec = importlib.util.spec_from_file_location('script', os.path.join(ROOT, script))
    module = importlib.util.module_from_spec(spec)
    sys.modules['script'] = module
    spec.loader.exec_module(module)  # defines the flags; main() is not run
    from absl import flags
    # Every flag the project defines (not absl's --help, -v, ... nor TensorFlow's).
    own = {flag for name, defined in flags.FLAGS.flags_by_module_dict().items()
           if name == 'script' or name.split('.')[0] in PROJECT_PACKAGES
           for flag in defined}
    print('| flag | default | meaning |')
    print('|---|---|---|')
    for flag in sorted(own, key=lambda f: f.name):
        value = flag.default
        value = ','.join(map(str, value)) if isinstance(value, (list, tuple)) else value
        default = '' if value is None or value == '' else f'`{value}`'
        meaning = ' '.join(flag.help.split()).replace('|', '\\|')
        print(f'| `--{flag.name}` | {default} | {meaning} |')


if __name__ == '__main__':
    main(sys.argv[1])
