"""Describers for Gymnasium's built-in envs, the Text-* registry and language-native envs."""
