# The classic leaderboard's SmolLM2 agents and env groups, sourced by classic_leaderboard.sh and
# classic_leaderboard_gpu.sh so that both play the same cells.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then  # run, not sourced: say what it is for
  echo "usage: source benchmarks/leaderboard_agents.sh   (sets ZS, GEN, EXACT_ENVS, LONG_DISCRETE,"
  echo "       LONG_ENVS, BJ, BJ_LM, LAKE, CARTPOLE for classic_leaderboard.sh and"
  echo "       classic_leaderboard_gpu.sh)"
  exit 0
fi
ZS="llm:smollm2-135m"
GEN="llm:smollm2-135m,mode=generate"
EXACT_ENVS=Text-Blackjack-v1,Text-FrozenLake-v1,Text-FrozenLake8x8-v1,Text-Taxi-v4,Text-CliffWalking-v1
LONG_DISCRETE=Text-MountainCar-v0,Text-Acrobot-v1  # score mode needs discrete actions
LONG_ENVS=$LONG_DISCRETE,Text-Pendulum-v1,Text-MountainCarContinuous-v0
# Policies trained from scratch by benchmarks/rl_from_scratch.sh (committed weights).
BJ="llm:smollm2-135m@benchmarks/weights/rl/blackjack-ppo-s0"  # a head on the frozen model
# The language model itself, LoRA-trained with no head: score mode, and generate mode (its
# policy directory records the mode); seed 0 of each recipe.
BJ_LM="llm:smollm2-135m@benchmarks/weights/rl/blackjack-lm-ppo-ema-s0"
BJ_LM="$BJ_LM,llm:smollm2-135m@benchmarks/weights/rl/blackjack-lm-gen-s0"
LAKE="llm:smollm2-135m@benchmarks/weights/rl/frozenlake-slippery-ppo-t1g-s0"  # the best slippery policy
CARTPOLE="llm:smollm2-135m@benchmarks/weights/rl/cartpole-ppo-layer8g-s0"  # the best final CartPole policy
