"""CLI commands: each module has add_arguments(parser) and run(args); its help line is its entry in cli.COMMANDS."""
