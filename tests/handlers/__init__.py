"""Handler modules the tests name in job types and schedule files
(``"tests.handlers.<module>:<function>"``); importable by executor subprocesses and
isolated children. Not tests.
"""
