"""The docs test's summary (blocks run, slow, skipped and why) at the end of the run."""
from helpers import docs_blocks


def pytest_terminal_summary(terminalreporter, config):
    summary = config.stash.get(docs_blocks.SUMMARY, None)
    if summary:
        terminalreporter.write_line(summary)
