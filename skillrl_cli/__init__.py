"""Click subcommands; ``cli.py`` imports each lazily."""
