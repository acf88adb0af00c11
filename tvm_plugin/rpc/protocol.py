"""The simulator's wire format (JSON requests and responses) and the TVM RPC/tracker
protocol pieces dcoc reads and writes itself (see the package docstring)."""
from __future__ import annotations

import dataclasses
import json
import logging
import struct
import time
from typing import Any

#: the remote function the simulator servers register
SIM_FUNC = "dcoc.targets.vta.simulate_json"
DEFAULT_KEY = "vta-sim"
#: a request longer than this (characters) is answered as invalid, unread
MAX_REQUEST_BYTES = 64 * 1024
#: seconds one simulation may take on a server before it is answered as invalid
DEFAULT_TIME_LIMIT = 20.0

logger = logging.getLogger("dcoc.rpc")


# ============================================================================ codec
def _fields(obj) -> dict:
    out = {}
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        v = getattr(obj, f.name)
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def encode_request(wl, hw, knobs: dict, epilogue: Any = "default") -> str:
    """JSON request text for one simulation."""
    from dcoc.targets.vta import Conv2DWorkload

    kind = "conv2d" if isinstance(wl, Conv2DWorkload) else "dense"
    req = {"workload": {"kind": kind, **_fields(wl)}, "hw": _fields(hw),
           "knobs": {k: int(v) for k, v in knobs.items()}}
    if epilogue is None:
        req["epilogue"] = None
    elif epilogue != "default":
        req["epilogue"] = _fields(epilogue)
    return json.dumps(req, sort_keys=True)


def _tuples(d: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}


def decode_request(text: str):
    """(workload, hw, knobs, epilogue kwargs) from request text."""
    from dcoc.targets.vta import Conv2DWorkload, DenseWorkload, Epilogue, HWConfig

    req = json.loads(text)
    w = dict(req["workload"])
    kind = w.pop("kind")
    wl = Conv2DWorkload(**_tuples(w)) if kind == "conv2d" else DenseWorkload(**w)
    hw = HWConfig(**req["hw"])
    kw = {}
    if "epilogue" in req:
        kw["epilogue"] = None if req["epilogue"] is None else Epilogue(**_tuples(req["epilogue"]))
    return wl, hw, dict(req["knobs"]), kw


def simulate_json(text: str) -> str:
    """The server side: simulate one request; invalid input is a result, never an error."""
    try:
        from dcoc.targets.vta import simulate

        wl, hw, knobs, kw = decode_request(str(text))
        r = simulate(wl, hw, knobs, **kw)
        if not r.valid:
            return json.dumps({"valid": False, "reason": str(r.reason)})
        return json.dumps({"valid": True, "reason": None, "cycles": int(r.cycles),
                           "seconds": float(r.seconds), "gops": float(r.gops),
                           "utilization": float(r.utilization)})
    except Exception as exc:  # noqa: BLE001 - report, do not kill the session
        return json.dumps({"valid": False, "reason": f"{type(exc).__name__}: {exc}"[:500]})


# ============================================================================ wire helpers
#: TVM's RPC handshake constants (tvm.rpc.base; repeated so the client side needs no TVM)
RPC_MAGIC = 0xFF271
RPC_TRACKER_MAGIC = 0x2F271
RPC_CODE_SUCCESS = RPC_MAGIC + 0
RPC_CODE_MISMATCH = RPC_MAGIC + 2
_TRACKER_SUCCESS, _TRACKER_PUT, _TRACKER_UPDATE_INFO = 0, 3, 5
_TRACKER_SUMMARY, _TRACKER_GET_PENDING = 6, 7

#: seconds a new connection may take to finish the handshake (magic, key length, key)
HANDSHAKE_TIMEOUT = 5.0
#: connections handled at once (handshakes in progress); more wait in the listen queue
MAX_CONNECTIONS = 16
#: the longest handshake key accepted ("client:KEY:RANDOM -timeout=N")
MAX_KEY_BYTES = 1024
#: the largest RPC packet a session reads: a request at the cap plus the packet framing;
#: a longer declared length closes the session before any of its body is read
MAX_PACKET_BYTES = MAX_REQUEST_BYTES + 4096
#: seconds the body of one packet may take to arrive once its length was read
PACKET_TIMEOUT = 30.0
#: seconds a matched session may send nothing while none of its requests is being served
#: (right after the handshake, or between requests); then the session is closed and the
#: server is free for the next client (RPCSimMeasurer reconnects on its next call)
IDLE_TIMEOUT = 5.0
#: the longest server key (``--key``): printable, no whitespace
MAX_SERVER_KEY = 200


def check_key(key) -> str:
    """``key`` when it can be a server key (non-empty, printable, no whitespace: the
    handshake splits on it); a one-line DcocError naming ``--key`` otherwise."""
    from dcoc.errors import DcocError

    k = key if isinstance(key, str) else None
    if not k or len(k) > MAX_SERVER_KEY or not k.isprintable() or any(c.isspace() for c in k):
        raise DcocError(f"--key {str(key)[:60]!r}: a server key must be 1..{MAX_SERVER_KEY} "
                        "printable characters without whitespace (clients match it word for "
                        "word), e.g. vta-sim")
    return k
#: the largest tracker reply read (JSON)
_MAX_TRACKER_REPLY = 1 << 24


class ProtocolError(OSError):
    """A peer that broke the wire protocol (bad magic, bad length, not UTF-8 ...)."""


def _recv_exact(sock, n: int, deadline: float | None = None) -> bytes:
    """Exactly ``n`` bytes; ``deadline`` (time.monotonic()) bounds the whole read."""
    import socket

    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("deadline passed")
            sock.settimeout(left)
        chunk = sock.recv(min(n - len(buf), 1 << 16))
        if not chunk:
            raise ConnectionError("connection closed by the peer")
        buf += chunk
    return bytes(buf)


def _send_json(sock, obj) -> None:
    data = json.dumps(obj).encode("utf-8")
    sock.sendall(struct.pack("<i", len(data)) + data)


def _recv_json(sock, deadline: float | None = None):
    size = struct.unpack("<i", _recv_exact(sock, 4, deadline))[0]
    if not 0 <= size <= _MAX_TRACKER_REPLY:
        raise ProtocolError(f"reply length {size} out of range")
    try:
        return json.loads(_recv_exact(sock, size, deadline).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"reply is not JSON: {exc}") from None


class TrackerConnection:
    """A connection to a TVM RPC tracker where every call has a deadline of ``timeout``
    seconds (TVM's own client waits forever on a peer that accepts and never answers)."""

    def __init__(self, addr, timeout: float = 5.0):
        import socket

        self.addr = parse_addr(addr)
        self.timeout = float(timeout)
        self.sock = socket.create_connection(self.addr, timeout=self.timeout)
        try:
            deadline = time.monotonic() + self.timeout
            self.sock.sendall(struct.pack("<i", RPC_TRACKER_MAGIC))
            magic = struct.unpack("<i", _recv_exact(self.sock, 4, deadline))[0]
            if magic != RPC_TRACKER_MAGIC:
                raise ProtocolError("not an RPC tracker (wrong magic number)")
        except TimeoutError:
            self.close()
            raise ProtocolError(f"no answer within {self.timeout:g} s") from None
        except BaseException:
            self.close()
            raise

    def call(self, msg):
        self.sock.settimeout(self.timeout)
        _send_json(self.sock, msg)
        return _recv_json(self.sock, time.monotonic() + self.timeout)

    def call_ok(self, msg) -> None:
        reply = self.call(msg)
        if reply != _TRACKER_SUCCESS:
            raise ProtocolError(f"tracker refused {msg[0]}: {str(reply)[:100]}")

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def parse_addr(addr, default_port: int = 9190) -> tuple[str, int]:
    if isinstance(addr, (tuple, list)):
        return str(addr[0]), int(addr[1])
    host, _, port = str(addr).rpartition(":")
    if not host:
        return str(addr), default_port
    return host.strip("[]"), int(port)
