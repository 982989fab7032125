"""When a model's weights changed: a key made of its parameters' version counters, its adapter
switches and its train/eval mode (``TransformersBackend.weights_key``), so caches built under
some weights (the shared prefix's KV, memoised rows) are dropped exactly when they change.

Listing the parameters and adapter layers is a walk over every module. :class:`WeightsWalk`
keeps the list until torch's global registration hooks see a module or parameter registered
anywhere in this process (``module.x = ...``, ``add_module``, ``register_parameter``, as peft
does when it adds an adapter), or another model is asked about: the key then costs a sum over
the version counters, not a walk (issue 51).

Example:
    >>> from llmgym.policy.testing import tiny_model
    >>> model, _ = tiny_model()
    >>> walk = WeightsWalk()
    >>> walk.key(model) == weights_key_walked(model)
    True
"""

from __future__ import annotations

from typing import Any

import torch

#: Bumped whenever any module in this process registers a submodule or a parameter.
_REGISTRATIONS = [0]


def _registered(*_args: Any) -> None:
    _REGISTRATIONS[0] += 1


torch.nn.modules.module.register_module_module_registration_hook(_registered)
torch.nn.modules.module.register_module_parameter_registration_hook(_registered)


def walk_weights(model: Any) -> tuple[list[Any], list[Any]]:
    """(every parameter of ``model``, its modules with an adapter switch: peft's layers)."""
    layers = [
        m
        for m in model.modules()
        if hasattr(m, "disable_adapters") and not callable(m.disable_adapters)
    ]
    return list(model.parameters()), layers


def _key(model: Any, params: list[Any], layers: list[Any]) -> tuple[Any, ...]:
    adapters = tuple((m.disable_adapters, tuple(getattr(m, "active_adapters", ()))) for m in layers)
    return sum(p._version for p in params), adapters, model.training


class WeightsWalk:
    """A model's parameters and adapter layers, listed once and kept until a registration
    anywhere, :meth:`forget` or another model."""

    def __init__(self) -> None:
        #: (model, registrations count, its parameters, its adapter layers) of the last walk.
        self._walk: tuple[Any, int, list[Any], list[Any]] | None = None

    def forget(self) -> None:
        """List the parameters and adapter layers anew at the next :meth:`key`."""
        self._walk = None

    def key(self, model: Any) -> tuple[Any, ...]:
        """The weights key of ``model`` (what :func:`weights_key_walked` gives, without the
        walk while the kept list holds)."""
        walk = self._walk
        if walk is None or walk[0] is not model or walk[1] != _REGISTRATIONS[0]:
            walk = self._walk = (model, _REGISTRATIONS[0], *walk_weights(model))
        return _key(model, walk[2], walk[3])


def weights_key_walked(model: Any) -> tuple[Any, ...]:
    """The weights key by a fresh walk over ``model`` (what the kept walk must always equal;
    the tests compare the two)."""
    return _key(model, *walk_weights(model))


__all__ = ["WeightsWalk", "walk_weights", "weights_key_walked"]
