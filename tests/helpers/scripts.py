"""Running the scripts as a user would, from tests."""
import os
import subprocess
import sys

from helpers import testing_utils

ROOT = testing_utils.TEST_DATA.parent.parent
TRAIN = 'train_image_classifier.py'
EVAL = 'eval_image_classifier.py'
EXPORT = 'export_inference_graph.py'


def run_script(script, *args, timeout=300):
    """Runs a script as a user would (TensorFlow's log level left to the script)."""
    env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
    env['PYTHONPATH'] = str(ROOT)
    return subprocess.run([sys.executable, str(ROOT / script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
