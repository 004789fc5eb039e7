"""Planning and combinatorial optimization: single-agent episodes played by a search
agent on jumanji's environments, measured against exact optima (`episodes`); the
`mcgs-jax evaluate` command is `mcgs_jax.apps.cli.evaluate_command`."""

from mcgs_jax.apps.planning.episodes import EpisodeResult, instances, play_episodes

__all__ = ["EpisodeResult", "instances", "play_episodes"]
