from grader.cli import entry

entry()
