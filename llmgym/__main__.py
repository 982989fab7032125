"""``python -m llmgym`` runs the command line."""

from llmgym.cli import main

main()
