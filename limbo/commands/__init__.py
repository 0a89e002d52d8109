"""One module per ``limbo`` command: ``add_parser(sub)`` declares its flags (each with a help
line) and ``run(args)`` does it. :mod:`limbo.cli` only builds the parser from these modules and
dispatches; options several commands share are in :mod:`limbo.commands.common`."""
