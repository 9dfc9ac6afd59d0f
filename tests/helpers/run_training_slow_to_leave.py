"""Runs train_image_classifier.py as a user types it, with a test-only fault point: this
worker of a multi-worker all-reduce reaches the end of training (the workers' meeting
after their last call, DeploymentPlan.leave_together) some seconds late, and writes the
time.time() of its arrival to a file first.

    run_training_slow_to_leave.py --leave_delay_secs=S --arrival_file=F [training flags]
"""
import os
import runpy
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, 'train_image_classifier.py')
USAGE = ('usage: run_training_slow_to_leave.py --leave_delay_secs=S --arrival_file=F '
         '[training flags]')


def main():
    if (len(sys.argv) < 3 or not sys.argv[1].startswith('--leave_delay_secs=')
            or not sys.argv[2].startswith('--arrival_file=')):
        sys.exit(USAGE)
    delay_secs = float(sys.argv[1].split('=', 1)[1])
    arrival_file = sys.argv[2].split('=', 1)[1]
    sys.argv = [SCRIPT, *sys.argv[3:]]  # cli.startup reads the command line as it loads
    sys.path.insert(0, ROOT)
    from cli import startup  # noqa: F401  (first, as in the script: before TensorFlow)
    from deployment import plan as plan_lib
    real_leave = plan_lib.DeploymentPlan.leave_together

    def leave_late(self):
        time.sleep(delay_secs)
        with open(arrival_file, 'w') as arrival:
            arrival.write(repr(time.time()))
        real_leave(self)

    plan_lib.DeploymentPlan.leave_together = leave_late
    runpy.run_path(SCRIPT, run_name='__main__')


if __name__ == '__main__':
    main()
