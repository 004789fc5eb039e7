"""Files that long jobs write: whole or not at all, and checked when read back.

Every file the command line and `mcgs_jax.apps.train` write (checkpoints, histories,
benchmark and match results) goes through `write_atomically`: the bytes go to a new
temporary file in the target's directory (a unique name, so two runs sharing a path
never share a temporary file), are flushed to disk, and the file is renamed over the
target (`os.replace`, atomic on POSIX and Windows). A kill at any moment leaves
either the old file or the new one, never half of one; the temporary file of a
killed write is the only trace, named `.<target>.<random>.partial`. The file gets the
mode a plain `open(path, "w")` would give it: an existing file's own, a new one's
from the umask.

Checkpoints add an envelope (`seal` / `unseal`): a msgpack map holding a format name,
the payload's length and SHA-256, and the payload, so that a damaged or truncated file
is refused by name instead of being read as something else.
"""

import contextlib
import hashlib
import io
import os
import stat
import tempfile

CHECKPOINT_FORMAT = "mcgs-jax checkpoint"
CHECKPOINT_VERSION = 1


class CheckpointError(ValueError):
  """A checkpoint file that cannot be used; the message names the file and why."""


def write_atomically(path: str, data: bytes | str) -> str:
  """Writes `data` (bytes, or text as UTF-8) to `path` atomically (see the module
  docstring), creating its directory. Returns `path`."""
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  payload = data.encode("utf-8") if isinstance(data, str) else data
  handle, temporary = tempfile.mkstemp(
    prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=directory
  )
  try:
    os.chmod(temporary, _mode_of_a_plain_open(path))
    with os.fdopen(handle, "wb") as stream:
      stream.write(payload)
      stream.flush()
      os.fsync(stream.fileno())
    os.replace(temporary, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.unlink(temporary)
    raise
  return path


def _mode_of_a_plain_open(path: str) -> int:
  """The permission bits `open(path, "w")` leaves `path` with: an existing file keeps
  its own, a new file gets 0o666 less the process's umask (`mkstemp` alone would give
  0o600)."""
  with contextlib.suppress(FileNotFoundError):
    return stat.S_IMODE(os.stat(path).st_mode)
  return 0o666 & ~_umask()


def _umask() -> int:
  """The process's umask, read from /proc where Linux shows it (setting it to read it
  back, the only portable way, would race with other threads creating files)."""
  with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:
    for line in status:
      if line.startswith("Umask:"):
        return int(line.split()[1], 8)
  umask = os.umask(0o022)
  os.umask(umask)
  return umask


def check_output_path(flag: str, path: str | None, directory: bool = False) -> None:
  """ValueError naming `flag` when `path` (a file, or with `directory` a folder to
  create) cannot be written: a command checks every output path before any work."""
  if not path:
    return
  target = os.path.abspath(path)
  if directory:
    _check_writable_directory(flag, path)
    return
  if os.path.isdir(target):
    raise ValueError(f"{flag} {path!r} is a directory, expected a file")
  parent = os.path.dirname(target)
  if not os.path.isdir(parent):
    raise ValueError(f"{flag} {path!r}: no directory {parent!r}")
  if not os.access(parent, os.W_OK):
    raise ValueError(f"{flag} {path!r}: directory {parent!r} is not writable")


def _check_writable_directory(flag: str, path: str) -> None:
  """ValueError naming `flag` unless the directory `path` exists or can be created,
  and a file can be created in it: both are tried (a directory created here stays,
  as the command would create it; the probe file is removed). `os.access` alone
  says yes to root for places no file can go, such as /proc."""
  try:
    os.makedirs(path, exist_ok=True)
    with tempfile.TemporaryFile(dir=path):
      pass
  except OSError as error:
    reason = error.strerror or type(error).__name__
    raise ValueError(f"{flag} {path!r}: cannot write files there ({reason})") from None


def save_figure(figure, path: str) -> str:
  """`figure.savefig(path, dpi=100)`, written atomically (the format from the file's
  extension, PNG without one)."""
  extension = os.path.splitext(path)[1].lstrip(".").lower() or "png"
  buffer = io.BytesIO()
  figure.savefig(buffer, format=extension, dpi=100)
  return write_atomically(path, buffer.getvalue())


def seal(payload: bytes) -> bytes:
  """`payload` in the checkpoint envelope (format, length, SHA-256)."""
  import msgpack  # flax's dependency: only checkpoints need it

  return msgpack.packb(
    {
      "format": CHECKPOINT_FORMAT,
      "version": CHECKPOINT_VERSION,
      "length": len(payload),
      "sha256": hashlib.sha256(payload).hexdigest(),
      "payload": payload,
    },
    use_bin_type=True,
  )


def unseal(path: str) -> bytes:
  """The payload of the checkpoint file `path`, verified. A file written before the
  envelope existed (a bare flax msgpack map) is returned as it is.

  Raises:
    CheckpointError: the file is missing, empty, truncated, not msgpack, or its
      length or checksum does not match (each said, with the path).
  """
  try:
    with open(path, "rb") as handle:
      data = handle.read()
  except FileNotFoundError:
    raise CheckpointError(f"checkpoint {path!r} does not exist") from None
  except IsADirectoryError:
    raise CheckpointError(f"checkpoint {path!r} is a directory, expected a file") from None
  except OSError as error:
    raise CheckpointError(f"checkpoint {path!r} cannot be read: {error.strerror}") from None
  import msgpack

  if not data:
    raise CheckpointError(f"checkpoint {path!r} is empty (0 bytes): its write never finished")
  try:
    envelope = msgpack.unpackb(data, raw=False)
  except (msgpack.ExtraData, ValueError, msgpack.UnpackException):
    raise CheckpointError(
      f"checkpoint {path!r} is truncated or not a checkpoint ({len(data)} bytes that "
      "msgpack cannot read)"
    ) from None
  if not isinstance(envelope, dict):
    raise CheckpointError(f"checkpoint {path!r} is not a checkpoint (no map at the top)")
  if envelope.get("format") != CHECKPOINT_FORMAT:
    return data  # an older checkpoint, without the envelope
  payload = envelope.get("payload")
  if not isinstance(payload, bytes) or len(payload) != envelope.get("length"):
    raise CheckpointError(
      f"checkpoint {path!r} is damaged: its payload is not the {envelope.get('length')} "
      "bytes it was written with"
    )
  if hashlib.sha256(payload).hexdigest() != envelope.get("sha256"):
    raise CheckpointError(f"checkpoint {path!r} is damaged: its SHA-256 does not match")
  return payload
