"""Runs one script's main on many argument lists in this one process (TensorFlow is
imported once), as the script runs it: flags parsed by absl, main under cli.guard.

    python tests/helpers/run_script_cases.py train_image_classifier.py cases.json

cases.json: [[name, [--flag=value, ...]], ...]. For each case stderr gets
'@@CASE <name>', the case's own output, then '@@STATUS <name> <exit status>'; an
exception that escapes the guard prints its traceback and status 99.
"""
import importlib.util
import json
import os
import sys
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    script, cases_file = sys.argv[1], sys.argv[2]
    sys.argv = [script]  # cli.startup reads the command line while the script loads
    sys.path.insert(0, ROOT)
    spec = importlib.util.spec_from_file_location('script_under_test',
                                                  os.path.join(ROOT, script))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from absl import flags
    from cli import guard, startup
    startup.quiet_python_logging()
    keep_alive = []  # results are never destroyed (see cli.guard.exit_now)
    with open(cases_file) as f:
        cases = json.load(f)
    for name, args in cases:
        sys.stderr.write(f'@@CASE {name}\n')
        sys.stderr.flush()
        try:
            flags.FLAGS.unparse_flags()
            argv = flags.FLAGS([script, *args])
            status, result = guard.run_guarded(module.main, argv)
            keep_alive.append(result)
        except flags.Error as error:  # as the script's guard.parse_flags reports it
            sys.stderr.write(f'ERROR: {guard.flag_error_message(error, flags.FLAGS)}\n')
            status = 1
        except BaseException:  # pylint: disable=broad-except
            traceback.print_exc()
            status = 99
        sys.stderr.write(f'@@STATUS {name} {status}\n')
        sys.stderr.flush()
    guard.exit_now(0, keep_alive)


if __name__ == '__main__':
    main()
