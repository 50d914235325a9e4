"""The command line's flags: a Go-style parser, the flag table, and the settings built from them.

`parsing` splits argv with Go/pflag syntax and reads value kinds; `table` lists every flag of `vpa run` and
`vpa replay` with its help group and the settings field it sets; `commands` builds `RunSettings` and
`ReplaySettings` (with upstream's environment fallbacks); `docs` renders `--help`, docs/flags.md and
docs/feature-gates.md from the same table.

Sits just below `vpa.cli` and imports only `vpa.model`: it never reads `os.environ` or `sys.argv` itself.
"""
