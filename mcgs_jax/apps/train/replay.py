"""The replay buffer of the training loop: the positions self-play recorded, on the
host, oldest overwritten first."""

from typing import Any

import numpy as np


class ReplayBuffer:
  """A fixed-size ring buffer of training positions (numpy, on the host)."""

  # What a position holds: `policy_weight` only with playout cap randomization.
  FIELDS = ("observation", "policy", "value", "policy_weight")

  def __init__(self, capacity: int):
    self.capacity = int(capacity)
    self.data: dict[str, np.ndarray] = {}
    self.size = 0
    self.cursor = 0

  def add(self, trajectory: dict[str, Any]) -> int:
    """Adds the valid positions of a self-play batch (observation, policy and value
    targets, and `policy_weight` where self-play records it); returns how many."""
    valid = np.asarray(trajectory["valid"]).reshape(-1)
    names = [name for name in self.FIELDS if name in trajectory]
    items = {
      name: np.asarray(trajectory[name]).reshape((valid.size,) + np.shape(trajectory[name])[2:])[
        valid
      ]
      for name in names
    }
    count = int(valid.sum())
    if not self.data:
      self.data = {
        name: np.zeros((self.capacity,) + item.shape[1:], item.dtype)
        for name, item in items.items()
      }
    for start in range(0, count, self.capacity):  # in chunks if count > capacity
      chunk = {name: item[start : start + self.capacity] for name, item in items.items()}
      n = len(chunk["value"])
      index = (self.cursor + np.arange(n)) % self.capacity
      for name, item in chunk.items():
        self.data[name][index] = item
      self.cursor = (self.cursor + n) % self.capacity
      self.size = min(self.size + n, self.capacity)
    return count

  def sample(self, rng: np.random.Generator, batch_size: int) -> dict[str, np.ndarray]:
    """`batch_size` positions drawn uniformly with replacement."""
    if self.size == 0:
      raise ValueError("the replay buffer is empty")
    index = rng.integers(0, self.size, batch_size)
    return {name: item[index] for name, item in self.data.items()}
