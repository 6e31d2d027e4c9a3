"""The schedule file: reading YAML into the frozen config objects of ``rota.core.config``.

``loader.load_schedule_file(path)`` validates a whole file (every problem as
``file:line: message``); ``file_text`` reads it (a small regular file in
UTF-8, nothing else); ``keys`` lists the keys of each section with the parser
of their values; ``fields`` parses single values; ``yaml_tree`` keeps the line
of every node. Rules are checked by compiling them with the rule
engine (``rota.scheduler.rules``), so the file and the scheduler cannot
disagree on what a rule means. It lives in the scheduler because it needs the
rule engine; the config objects it produces live in ``rota.core.config``.
"""
