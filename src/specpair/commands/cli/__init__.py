"""The command line's wiring, one module per `specpair` command: `register` adds the
command's parser, `handle` runs it (parse arguments, call the library, render, exit
status). The library each command calls lives beside this package (commands/) or below.
"""
