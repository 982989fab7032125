"""The training recipes (``llmgym.rl.recipes``), under a short name for notebooks and TRL
users: ``llmgym.recipes.load("blackjack-lm-ppo-ema")`` is the config of the recipe where the
language model itself learns Blackjack; ``llmgym recipes`` lists them all.

Example:
    >>> from llmgym import recipes
    >>> recipes.get("blackjack-ppo").policy
    'head'
"""

from llmgym.rl.recipes import *  # noqa: F403  (the same names, one list of them)
from llmgym.rl.recipes import __all__  # noqa: F401
