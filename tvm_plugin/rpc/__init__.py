"""Distributed measurement over a TVM RPC tracker.

Two ways to scale measurement out, both through the standard TVM tracker
(``python -m tvm.exec.rpc_tracker --host 127.0.0.1 --port 9190``; use a non-loopback
address only on a network you trust, see *Security* below):

1. **Real hardware (llvm/cuda)**: MetaSchedule's ``RPCRunner``.  Start TVM's own servers
   on the measuring machines (``python -m tvm.exec.rpc_server --tracker HOST:9190 --key
   KEY``) and pass ``runner="rpc://HOST:9190/KEY"`` to :func:`tvm_plugin.metaschedule.tuning.tune_model`
   (or ``dcoc tune ... --runner rpc://HOST:9190/KEY``); see :func:`tvm_plugin.metaschedule.build.make_runner`.
2. **The VTA simulator**: ``dcoc rpc serve --tracker HOST:9190 --key vta-sim``
   starts an RPC server that registers the simulator as the remote function
   :data:`SIM_FUNC` (JSON in: workload, hardware, knobs; JSON out: valid, reason, cycles,
   seconds).  :class:`RPCSimMeasurer` fans a batch of configs out over every server the
   tracker has for the key -- one session per server, one thread per session, a
   per-measurement timeout -- so simulation spreads over many machines.  A server that
   dies (or times out) turns its in-flight measurement into an error result and leaves
   the pool; the batch continues on the others, and servers that (re)join the tracker
   are picked up at the next batch.

Wire format (JSON text, both ways)::

    request  {"workload": {"kind": "conv2d", "batch": 1, "height": 56, ..., "kernel": [3, 3],
                           ...} | {"kind": "dense", "batch": .., "in_features": .., "out_features": ..},
              "hw": {HWConfig constructor fields},
              "knobs": {knob: int},
              "epilogue": absent (VTA's default requantization) | null (none) | {Epilogue fields}}
    response {"valid": true, "reason": null, "cycles": 569900, "seconds": 0.0057,
              "gops": 12.3, "utilization": 0.41}
             {"valid": false, "reason": "..."}   (invalid knobs/config; never an RPC error)

Security.  TVM's own RPC server (``python -m tvm.exec.rpc_server``, case 1) runs whatever
a client sends it -- upload a shared library, load it, call it -- so anyone who can reach
its port (or the tracker's) can run code as the server's user: expose it only on a
network where you trust every host.  The simulator server here (case 2) is restricted:
in each session process every TVM global function except :data:`SIM_FUNC` is removed
before the session starts (no upload, download, load_module, module loading or any other
TVM function can be called), a request larger than :data:`MAX_REQUEST_BYTES` is refused,
and one simulation may take at most ``--time-limit`` seconds (default
:data:`DEFAULT_TIME_LIMIT`) before it is answered as invalid.  Its accept loop
(:class:`SimServer`, not TVM's) gives each connection :data:`HANDSHAKE_TIMEOUT` seconds
to hand-shake, handles at most :data:`MAX_CONNECTIONS` at once, checks every declared
length (key, packet) before reading what follows (a packet above
:data:`MAX_PACKET_BYTES` closes its session unread), and closes only the connection that
sent malformed bytes; a matched session that sends nothing for ``--idle-timeout`` seconds
(default :data:`~tvm_plugin.rpc.protocol.IDLE_TIMEOUT`) while none of its requests is
being served is closed, so an idle client cannot hold the server (:class:`RPCSimMeasurer`
reconnects on its next call); the tracker registration is renewed only when the tracker
connection fails.  It listens on 127.0.0.1
unless ``--host`` says otherwise; binding it to another address lets every host that can
reach that address use this machine's CPU for simulations (and try to crash the
process), so do that only on a trusted network.  The tracker has no authentication
either.

Modules: :mod:`~tvm_plugin.rpc.protocol` (the wire format, the RPC/tracker protocol
pieces), :mod:`~tvm_plugin.rpc.server` (:class:`SimServer`, ``dcoc rpc serve``),
:mod:`~tvm_plugin.rpc.client` (:class:`RPCSimMeasurer`, tracker queries).
"""
from tvm_plugin.rpc.client import RPCSimMeasurer, check_tracker, tracker_servers
from tvm_plugin.rpc.protocol import (
    DEFAULT_KEY,
    DEFAULT_TIME_LIMIT,
    MAX_CONNECTIONS,
    MAX_PACKET_BYTES,
    MAX_REQUEST_BYTES,
    SIM_FUNC,
    TrackerConnection,
    decode_request,
    encode_request,
    simulate_json,
)
from tvm_plugin.rpc.server import SimServer, run_serve, serve

__all__ = ["DEFAULT_KEY", "DEFAULT_TIME_LIMIT", "MAX_CONNECTIONS", "MAX_PACKET_BYTES",
           "MAX_REQUEST_BYTES", "SIM_FUNC", "RPCSimMeasurer", "SimServer", "TrackerConnection",
           "check_tracker", "decode_request", "encode_request", "run_serve", "serve",
           "simulate_json", "tracker_servers"]
