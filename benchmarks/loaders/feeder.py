"""An epoch loader run in a process of its own (loader.decode_in=process): the feeder.

The feeder process builds the loader as the rank would (the same DataLoader workers, the same decode
thread) and hands each batch to the rank: on a GPU through CUDA IPC (the batch stays in device memory, only
its handle crosses), on a CPU through shared memory. Its Python work then no longer shares the training
process's GIL and cores, which is what slows a loader that decodes in the training process.

The rules of the hand-over:
- a batch is pickled (torch's reductions) in the feeder's main thread. For a CUDA tensor torch records an
  interprocess event on that thread's current stream, which the decode thread's batch event already
  orders, and unpickling makes the rank's current stream wait on it: no host waits on either side;
- the rank copies the batch into its own memory on its current stream. Releasing a received CUDA tensor
  synchronises the releasing thread's current stream (torch's deleter, so the feeder may reuse the
  memory). The rank releases one only after its copy's event is done and with an idle stream of its own
  current, so the sync waits for nothing;
- flow control: the feeder sends a batch only against a credit; the rank gives `prefetch` at the start of
  an epoch and one per batch it takes. The feeder holds at most that many batches beside the rank's copy;
- an epoch the rank leaves early is stopped: the rank says so, discards what is already on the way (so the
  feeder's memory is released) and waits for the feeder's acknowledgement;
- the feeder ends when the rank asks, when the rank's end of the pipe closes (the rank died), and an error
  there reaches the rank as the same one-line message.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import pickle
import traceback
import weakref
from collections.abc import Callable, Iterator
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch

from benchmarks.errors import ConfigError

# how long the rank waits for the feeder to build its loader, and for it to exit
START_TIMEOUT_S = 300.0
EXIT_TIMEOUT_S = 30.0


def _send(conn, message: tuple) -> None:
    """One message, pickled with torch's reductions here, on this thread's current stream."""
    import torch.multiprocessing  # noqa: F401  (registers torch's reductions with ForkingPickler)

    conn.send_bytes(ForkingPickler.dumps(message))


def _receive(conn, timeout_s: float | None = None) -> tuple:
    """The next message; a CUDA tensor in it makes this thread's current stream wait for the feeder's work."""
    if timeout_s is not None and not conn.poll(timeout_s):
        raise RuntimeError(
            f"loader decode_in=process: nothing from the other side for {timeout_s:.0f} s (loader.timeout_s); "
            "the feeder or a DataLoader worker is stuck"
        )
    return pickle.loads(conn.recv_bytes())


def serve(build: Callable[..., Any], args: tuple, conn) -> None:
    """The feeder process: build(*args) -> an EpochLoader, then epochs as the rank asks for them."""
    try:
        epoch_loader = build(*args)
        _send(conn, ("ready", len(epoch_loader), epoch_loader.num_samples, epoch_loader.describe()))
        while True:
            command = _receive(conn)
            if command[0] == "exit":
                return
            if command[0] != "epoch":  # a credit for the last epoch's tail, sent before its ("end",) came
                continue
            _, epoch, credits = command
            epoch_loader.set_epoch(epoch)
            outcome = _feed_epoch(epoch_loader, conn, credits)
            if outcome is None:
                return
            _send(conn, outcome)
    except (EOFError, BrokenPipeError, ConnectionResetError):  # the rank is gone
        return
    except BaseException as error:
        with contextlib.suppress(OSError):
            kind = "config" if isinstance(error, ConfigError) else "error"
            text = str(error) if kind == "config" else "".join(traceback.format_exception_only(error)).strip()
            _send(conn, (kind, text))


def _feed_epoch(epoch_loader, conn, credits: int) -> tuple | None:
    """One epoch's batches, each against a credit; ("end",) after the last, ("stopped",) if the rank
    stopped the epoch, None if it asked the feeder to exit."""
    for batch in epoch_loader:
        while credits == 0 or conn.poll():
            command = _receive(conn)
            if command[0] == "stop":
                return ("stopped",)
            if command[0] == "exit":
                return None
            credits += 1  # ("credit",)
        _send(conn, ("batch", batch))
        credits -= 1
        del batch
        if torch.cuda.is_initialized():
            torch.cuda.ipc_collect()  # memory of batches the rank has released
    return ("end",)


class FedEpoch:
    """The rank's side: an EpochLoader whose batches come from a feeder process."""

    def __init__(
        self,
        build: Callable[..., Any],
        args: tuple,
        *,
        device: torch.device,
        prefetch: int,
        timeout_s: float,
        name: str,
    ):
        """build(*args) runs in the feeder (both picklable); prefetch: the batches it may have sent ahead;
        timeout_s: how long a batch may take (0: no limit)."""
        self.device, self.prefetch, self.epoch = device, prefetch, 0
        self.timeout_s = timeout_s or None
        self.cuda = device.type == "cuda"
        context = multiprocessing.get_context("spawn")  # a CUDA context cannot be forked
        self._conn, child = context.Pipe(duplex=True)
        # not a daemon: the feeder starts DataLoader workers of its own
        self._process = context.Process(target=serve, args=(build, args, child), name=name, daemon=False)
        self._process.start()
        child.close()
        self._finalizer = weakref.finalize(self, _shut_down, self._process, self._conn)
        message = self._expect(self._next_message(START_TIMEOUT_S), "ready")
        _, self._length, self.num_samples, self._describe = message
        # releasing a received tensor synchronises the current stream: this one never has work queued
        self._release_stream = torch.cuda.Stream(device) if self.cuda else None

    def _next_message(self, timeout_s: float | None) -> tuple:
        """The feeder's next message; its death (the pipe closed) or silence for timeout_s as an error."""
        try:
            return _receive(self._conn, timeout_s)
        except EOFError:
            self._process.join(EXIT_TIMEOUT_S)
            raise RuntimeError(
                f"loader decode_in=process: the feeder process ended (exit code {self._process.exitcode}) "
                "without a message; its error is on stderr above"
            ) from None

    def _expect(self, message: tuple, kind: str) -> tuple:
        """The message if it is of `kind`; the feeder's error as the rank's own."""
        if message[0] == "config":
            raise ConfigError(message[1])
        if message[0] == "error":
            raise RuntimeError(f"loader decode_in=process: the feeder failed: {message[1]}")
        if message[0] != kind:
            raise RuntimeError(f"loader decode_in=process: expected {kind!r} from the feeder, got {message[0]!r}")
        return message

    def __len__(self) -> int:
        return self._length

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def describe(self) -> dict:
        return {**self._describe, "decode_in": "process"}

    def _release(self, pending: collections.deque, *, wait: bool) -> None:
        """Drops the received batches whose copies are done (all of them if wait), under the idle stream."""
        with torch.cuda.stream(self._release_stream) if self.cuda else contextlib.nullcontext():
            while pending and (wait or pending[0][1] is None or pending[0][1].query()):
                received, event = pending.popleft()
                if event is not None:
                    event.synchronize()
                del received

    def _own(self, batch: Any) -> tuple[Any, Any]:
        """(the rank's copy of a received batch, the event after the copy); on a CPU the batch itself."""
        if not self.cuda:
            return batch, None
        copy = tuple(t.clone() for t in batch)
        event = torch.cuda.Event()
        event.record()
        return copy, event

    def __iter__(self) -> Iterator:
        _send(self._conn, ("epoch", self.epoch, self.prefetch))
        pending: collections.deque = collections.deque()
        finished = False
        try:
            while True:
                message = self._next_message(self.timeout_s)
                if message[0] == "end":
                    finished = True
                    return
                batch = self._expect(message, "batch")[1]
                del message
                copy, event = self._own(batch)
                pending.append((batch, event))
                del batch
                _send(self._conn, ("credit",))
                self._release(pending, wait=False)
                yield copy
        finally:
            if not finished:
                self._stop_epoch(pending)
            self._release(pending, wait=True)

    def _stop_epoch(self, pending: collections.deque) -> None:
        """Stops an epoch left early: the batches already sent are taken and released, up to the feeder's
        acknowledgement (or its end of the epoch)."""
        with contextlib.suppress(EOFError, BrokenPipeError, ConnectionResetError):
            _send(self._conn, ("stop",))
            while True:
                message = _receive(self._conn, EXIT_TIMEOUT_S)
                if message[0] in ("stopped", "end"):
                    return
                if message[0] == "batch":
                    pending.append((message[1], None))
                else:
                    self._expect(message, "batch")

    def close(self) -> None:
        """Ends the feeder (also at garbage collection and at exit)."""
        self._finalizer()


def _shut_down(process, conn) -> None:
    with contextlib.suppress(OSError, ValueError):
        _send(conn, ("exit",))
    process.join(EXIT_TIMEOUT_S)
    if process.is_alive():
        process.terminate()
        process.join(EXIT_TIMEOUT_S)
    conn.close()
