import io

from core.progress import ProgressBar


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_log_output_prints_first_and_final_lines_only_between_intervals():
    stream = io.StringIO()
    bar = ProgressBar('eval', 100, min_interval_secs=3600, stream=stream)
    for done in range(10, 101, 10):
        bar.update(done)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith('eval [' + '#' * 3 + '.' * 27 + '] 10/100')
    assert lines[1].startswith('eval [' + '#' * 30 + '] 100/100')


def test_terminal_output_rewrites_one_line_in_place():
    stream = _Terminal()
    bar = ProgressBar('convert', 4, unit='images', stream=stream)
    for done in range(1, 5):
        bar.update(done)
    bar.close()
    text = stream.getvalue()
    assert text.count('\r') == 3 and text.count('\n') == 1
    assert text.endswith('4/4 (' + text.rsplit('4/4 (', 1)[1])
    assert 'images/sec' in text


def test_unknown_total_counts_and_closes_once():
    stream = io.StringIO()
    bar = ProgressBar('eval', None, min_interval_secs=3600, stream=stream)
    bar.update(7)
    bar.update(9)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith('eval 7 examples') and lines[-1].startswith('eval 9 examples')
