"""Progress bars of the long-running applications (the training loop, the arena,
`mcgs-jax play`)."""


def progress_bar(**tqdm_arguments):
  """A `tqdm.auto` bar, or None where tqdm is not installed: it comes with the train
  and bench extras, and a progress bar is not worth failing a command for."""
  try:
    from tqdm.auto import tqdm
  except ModuleNotFoundError:
    return None
  return tqdm(**tqdm_arguments)
