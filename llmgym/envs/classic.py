"""Curated describers for Gymnasium's classic-control and Box2D environments.

Example:
    >>> import gymnasium as gym
    >>> env = gym.make("CartPole-v1")
    >>> obs, _ = env.reset(seed=0)
    >>> print(CARTPOLE.describe(obs, env))
    Cart position: 0.014 (the episode ends beyond -2.4 or 2.4)
    Cart velocity: -0.023
    Pole angle: -0.046 rad (-2.6 degrees; leaning left; the episode ends beyond 12 degrees)
    Pole angular velocity: -0.048 rad/s (rotating left)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import gymnasium as gym

from llmgym.describers import CuratedDescriber, fmt


def _side(value: float, negative: str, positive: str, eps: float = 1e-3) -> str:
    if abs(value) < eps:
        return "steady"
    return positive if value > 0 else negative


def _cartpole(obs: Any, env: gym.Env, rate_in_degrees: bool = False) -> str:
    x, x_dot, theta, theta_dot = (float(v) for v in obs)
    per_second = (
        f"{fmt(math.degrees(theta_dot), 1)} degrees per second; " if rate_in_degrees else ""
    )
    return "\n".join(
        [
            f"Cart position: {fmt(x, 3)} (the episode ends beyond -2.4 or 2.4)",
            f"Cart velocity: {fmt(x_dot, 3)}",
            f"Pole angle: {fmt(theta, 3)} rad ({fmt(math.degrees(theta), 1)} degrees; "
            f"{_side(theta, 'leaning left', 'leaning right')}; "
            "the episode ends beyond 12 degrees)",
            f"Pole angular velocity: {fmt(theta_dot, 3)} rad/s "
            f"({per_second}{_side(theta_dot, 'rotating left', 'rotating right')})",
        ]
    )


CARTPOLE = CuratedDescriber(
    task=(
        "You balance a pole on a cart that moves along a track. Each step you push the cart "
        "left or right. You earn +1 for every step the pole stays upright (at most 500 steps). "
        "Push the cart toward the side the pole leans to keep it balanced."
    ),
    actions=[("LEFT", "push the cart to the left"), ("RIGHT", "push the cart to the right")],
    render=_cartpole,
)
#: CARTPOLE with the angular velocity also in degrees per second, as the angle is: a small LM's
#: hidden state carries the rate's size within one side 0.51 (R^2) this way, 0.17 in rad/s alone
#: (``experiments/cartpole_readable.py``). ``gym.make("Text-CartPole-v1",
#: describer="cartpole-degrees")``.
CARTPOLE_DEGREES = dataclasses.replace(
    CARTPOLE, render=lambda obs, env: _cartpole(obs, env, rate_in_degrees=True)
)


def _acrobot(obs: Any, env: gym.Env) -> str:
    cos1, sin1, cos2, sin2, omega1, omega2 = (float(v) for v in obs)
    theta1, theta2 = math.atan2(sin1, cos1), math.atan2(sin2, cos2)
    height = -cos1 - math.cos(theta1 + theta2)
    return "\n".join(
        [
            f"Upper link angle: {fmt(math.degrees(theta1), 1)} degrees from hanging down",
            f"Lower link angle: {fmt(math.degrees(theta2), 1)} degrees relative to the upper link",
            f"Upper link angular velocity: {fmt(omega1, 3)} rad/s",
            f"Lower link angular velocity: {fmt(omega2, 3)} rad/s",
            f"Tip height: {fmt(height, 3)} (goal: above 1.0; range -2 to 2)",
        ]
    )


ACROBOT = CuratedDescriber(
    task=(
        "You control a two-link pendulum (an acrobot) hanging from a fixed joint by applying "
        "torque to the joint between the links. Swing the tip above the target height (1.0) "
        "as fast as possible. Every step costs -1 until the goal is reached (at most 500 steps). "
        "Pump energy by torquing in the direction the links already swing."
    ),
    actions=[
        ("NEGATIVE", "apply -1 torque to the middle joint"),
        ("ZERO", "apply no torque"),
        ("POSITIVE", "apply +1 torque to the middle joint"),
    ],
    render=_acrobot,
)


def _mountain_car(obs: Any, env: gym.Env) -> str:
    position, velocity = (float(v) for v in obs)
    return "\n".join(
        [
            f"Car position: {fmt(position, 3)} (valley bottom near -0.52; flag at 0.5; "
            "left wall at -1.2)",
            f"Car velocity: {fmt(velocity, 4)} "
            f"({_side(velocity, 'moving left', 'moving right', 1e-4)})",
        ]
    )


_MOUNTAIN_CAR_TASK = (
    "You drive an underpowered car in a valley between two hills. The engine alone cannot climb "
    "the right hill: build momentum by rocking back and forth, then reach the flag at position "
    "0.5 on the right. "
)

MOUNTAIN_CAR = CuratedDescriber(
    task=_MOUNTAIN_CAR_TASK + "Every step costs -1 until the flag is reached (at most 200 steps).",
    actions=[
        ("LEFT", "accelerate to the left"),
        ("NONE", "do not accelerate"),
        ("RIGHT", "accelerate to the right"),
    ],
    render=_mountain_car,
)

MOUNTAIN_CAR_CONTINUOUS = CuratedDescriber(
    task=_MOUNTAIN_CAR_TASK
    + "The action is the engine force in [-1, 1] (negative pushes left). Reaching the flag "
    "earns +100; each step costs 0.1 times the squared force (at most 999 steps).",
    actions=None,
    render=_mountain_car,
)


def _pendulum(obs: Any, env: gym.Env) -> str:
    cos, sin, omega = (float(v) for v in obs)
    angle = math.degrees(math.atan2(sin, cos))
    return "\n".join(
        [
            f"Pendulum angle: {fmt(angle, 1)} degrees from upright "
            f"(0 is upright, +/-180 hangs down; positive is counter-clockwise)",
            f"Angular velocity: {fmt(omega, 3)} rad/s (positive is counter-clockwise)",
        ]
    )


PENDULUM = CuratedDescriber(
    task=(
        "You swing a pendulum up and hold it upright by applying torque at its pivot. The "
        "action is the torque in [-2, 2] (positive turns counter-clockwise). The reward each "
        "step is higher (closer to 0) the more upright and still the pendulum is and the less "
        "torque you use (200 steps)."
    ),
    actions=None,
    render=_pendulum,
)


def _lunar_lander(obs: Any, env: gym.Env) -> str:
    x, y, vx, vy, angle, omega, left, right = (float(v) for v in obs)
    legs = [name for name, c in (("left", left), ("right", right)) if c > 0.5]
    return "\n".join(
        [
            f"Position: x {fmt(x, 3)} (pad centre at 0), height {fmt(y, 3)} (pad at 0)",
            f"Velocity: horizontal {fmt(vx, 3)}, vertical {fmt(vy, 3)}",
            f"Tilt: {fmt(math.degrees(angle), 1)} degrees, turning at {fmt(omega, 3)} rad/s",
            f"Legs touching the ground: {', '.join(legs) if legs else 'none'}",
        ]
    )


LUNAR_LANDER = CuratedDescriber(
    task=(
        "You land a lunar module on the landing pad at the origin. Landing softly on the pad "
        "earns 100-140 points, crashing costs -100, and firing engines costs fuel. Keep the "
        "module upright, kill the vertical speed near the ground, and stay over the pad."
    ),
    actions=[
        ("NOTHING", "fire no engine"),
        ("LEFT", "fire the left orientation engine (pushes the module right and tilts it)"),
        ("MAIN", "fire the main engine (pushes up)"),
        ("RIGHT", "fire the right orientation engine (pushes the module left and tilts it)"),
    ],
    render=_lunar_lander,
)


# The second wording of each env (``wording="alt"``, ``llmgym.envs.variants``): the same facts
# and action names, phrased and laid out differently.


def _cartpole_alt(obs: Any, env: gym.Env) -> str:
    x, x_dot, theta, theta_dot = (float(v) for v in obs)
    return "\n".join(
        [
            f"The cart sits at x = {fmt(x, 3)} on the rail and moves at {fmt(x_dot, 3)}.",
            f"The pole tilts {fmt(math.degrees(theta), 1)} degrees "
            f"({_side(theta, 'to the left', 'to the right')}) and turns at "
            f"{fmt(theta_dot, 3)} rad/s "
            f"({_side(theta_dot, 'toward the left', 'toward the right')}).",
        ]
    )


CARTPOLE_ALT = CuratedDescriber(
    task=(
        "A pole is hinged on top of a cart that slides along a straight rail. At every step you "
        "shove the cart one way or the other. You score one point per step while the pole stays "
        "up (500 steps at most); the episode ends when the pole tips past 12 degrees or the cart "
        "leaves the rail at x = -2.4 or 2.4. Keep the cart under the pole: shove it toward the "
        "side the pole tilts to."
    ),
    actions=[("LEFT", "shove the cart leftward"), ("RIGHT", "shove the cart rightward")],
    render=_cartpole_alt,
)


def _acrobot_alt(obs: Any, env: gym.Env) -> str:
    cos1, sin1, cos2, sin2, omega1, omega2 = (float(v) for v in obs)
    theta1, theta2 = math.atan2(sin1, cos1), math.atan2(sin2, cos2)
    height = -cos1 - math.cos(theta1 + theta2)
    return "\n".join(
        [
            f"The first rod hangs {fmt(math.degrees(theta1), 1)} degrees from straight down; the "
            f"second is bent {fmt(math.degrees(theta2), 1)} degrees from the first.",
            f"Spin rates: first rod {fmt(omega1, 3)} rad/s, second rod {fmt(omega2, 3)} rad/s.",
            f"The free end is at height {fmt(height, 3)} (target: over 1.0; range -2 to 2).",
        ]
    )


ACROBOT_ALT = CuratedDescriber(
    task=(
        "Two rods hang in a chain from a fixed pivot; only the joint between them has a motor. "
        "Lift the free end of the lower rod over height 1.0 quickly: every step before that "
        "scores -1 (500 steps at most). Build up the swing by driving the motor the way the "
        "rods already move."
    ),
    actions=[
        ("NEGATIVE", "drive the middle motor with torque -1"),
        ("ZERO", "leave the motor off"),
        ("POSITIVE", "drive the middle motor with torque +1"),
    ],
    render=_acrobot_alt,
)


def _mountain_car_alt(obs: Any, env: gym.Env) -> str:
    position, velocity = (float(v) for v in obs)
    heading = _side(velocity, "heading left", "heading right", 1e-4)
    return (
        f"The car is at x = {fmt(position, 3)} with speed {fmt(velocity, 4)} ({heading}). "
        "The valley floor is near x = -0.52, the flag at x = 0.5 and the left wall at x = -1.2."
    )


_MOUNTAIN_CAR_ALT_TASK = (
    "A car with a weak engine sits between two hills and must get to the flag at x = 0.5 on top "
    "of the right hill. Driving straight up does not work: swing back and forth to gain speed "
    "first. "
)

MOUNTAIN_CAR_ALT = CuratedDescriber(
    task=_MOUNTAIN_CAR_ALT_TASK
    + "Each step scores -1 until the car reaches the flag (200 steps at most).",
    actions=[
        ("LEFT", "throttle toward the left"),
        ("NONE", "let the car roll"),
        ("RIGHT", "throttle toward the right"),
    ],
    render=_mountain_car_alt,
)

MOUNTAIN_CAR_CONTINUOUS_ALT = CuratedDescriber(
    task=_MOUNTAIN_CAR_ALT_TASK
    + "The action is one number in [-1, 1], the engine's push (below 0 pushes left). The flag "
    "is worth +100; every step costs 0.1 times the push squared (999 steps at most).",
    actions=None,
    render=_mountain_car_alt,
)


def _pendulum_alt(obs: Any, env: gym.Env) -> str:
    cos, sin, omega = (float(v) for v in obs)
    return (
        f"The rod points {fmt(math.degrees(math.atan2(sin, cos)), 1)} degrees away from straight "
        f"up and spins at {fmt(omega, 3)} rad/s (0 degrees is up, +/-180 is down; positive "
        "values are counter-clockwise)."
    )


PENDULUM_ALT = CuratedDescriber(
    task=(
        "A rod hangs from a motorized pivot. Each step you apply a torque in [-2, 2] (positive "
        "turns it counter-clockwise) to swing it up and balance it pointing straight up. A "
        "step's reward is 0 at best and more negative the farther the rod is from upright, the "
        "faster it spins and the harder you push (200 steps)."
    ),
    actions=None,
    render=_pendulum_alt,
)


def _lunar_lander_alt(obs: Any, env: gym.Env) -> str:
    x, y, vx, vy, angle, omega, left, right = (float(v) for v in obs)
    legs = " and ".join(name for name, c in (("left", left), ("right", right)) if c > 0.5)
    return "\n".join(
        [
            f"Offset from the pad centre: {fmt(x, 3)}; altitude above the pad: {fmt(y, 3)}.",
            f"Sideways speed {fmt(vx, 3)}, upward speed {fmt(vy, 3)}.",
            f"The lander leans {fmt(math.degrees(angle), 1)} degrees and rotates at "
            f"{fmt(omega, 3)} rad/s.",
            f"Legs in contact: {legs or 'none'}.",
        ]
    )


LUNAR_LANDER_ALT = CuratedDescriber(
    task=(
        "Set a lander down gently on the landing pad at the origin. A soft landing on the pad is "
        "worth 100-140 points, a crash -100, and every engine firing burns fuel (costs points). "
        "Stay level, slow the descent before touching down, and keep over the pad."
    ),
    actions=[
        ("NOTHING", "leave all engines off"),
        ("LEFT", "fire the left side thruster (pushes the lander right and rotates it)"),
        ("MAIN", "fire the bottom engine (pushes up)"),
        ("RIGHT", "fire the right side thruster (pushes the lander left and rotates it)"),
    ],
    render=_lunar_lander_alt,
)
