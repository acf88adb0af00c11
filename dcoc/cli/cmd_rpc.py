"""``dcoc rpc``: the VTA simulator as an RPC server, and a tracker's status."""
from __future__ import annotations

from dcoc.cli.options import Output, add_output_arguments, port_number, seconds

# tvm_plugin.rpc's defaults, repeated so that building the parser imports no tvm_plugin
# (tests/tvm/test_rpc_fuzz.py checks they agree)
DEFAULT_KEY = "vta-sim"
DEFAULT_TIME_LIMIT = 20.0
DEFAULT_IDLE_TIMEOUT = 5.0

NAME = "rpc"
HELP = "serve the VTA simulator over a TVM RPC tracker, or show a tracker's servers"
DESCRIPTION = """\
serve:  start a simulator server registered with a TVM RPC tracker under a key;
        RPCSimMeasurer spreads simulations over every server of that key.  The server
        answers simulation requests only (every other TVM function is removed from its
        session processes: no upload, no load_module), caps a request at 64 KiB and a
        simulation at --time-limit seconds, and listens on 127.0.0.1 unless --host says
        otherwise.  Exposing it (or the tracker, which has no authentication) on a network
        lets every host there use this machine's CPU: do it only on a trusted network.
status: free/pending servers of a key; an unreachable tracker is a one-line error
        within a few seconds.

examples:
  python -m tvm.exec.rpc_tracker --host 127.0.0.1 --port 9190 &
  dcoc rpc serve --tracker 127.0.0.1:9190 --key vta-sim
  dcoc rpc status --tracker 127.0.0.1:9190 --json -"""


def add_serve_arguments(s) -> None:
    """The ``dcoc rpc serve`` options."""
    s.add_argument("--tracker", required=True, help="HOST:PORT of the RPC tracker")
    s.add_argument("--key", default=DEFAULT_KEY, help=f"server key (default {DEFAULT_KEY})")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; another "
                        "address lets every host that reaches it run simulations here)")
    s.add_argument("--port", type=port_number, default=9090, help="first port to try (1-65535)")
    s.add_argument("--port-end", type=port_number, default=None,
                   help="last port to try (default PORT+100)")
    s.add_argument("--custom-addr", default=None, help="address to report to the tracker")
    s.add_argument("--time-limit", type=seconds, default=DEFAULT_TIME_LIMIT,
                   help=f"seconds one simulation may take (default {DEFAULT_TIME_LIMIT:g}); "
                        "longer ones are answered as invalid")
    s.add_argument("--idle-timeout", type=seconds, default=DEFAULT_IDLE_TIMEOUT,
                   help=f"seconds a client's session may send nothing while none of its requests "
                        f"is being served (default {DEFAULT_IDLE_TIMEOUT:g}); then it is closed "
                        "and the server serves the next client")


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="rpc_cmd", metavar="ACTION", required=True)
    s = sub.add_parser("serve", help="start a simulator server (blocks)")
    add_serve_arguments(s)
    g = s.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true", help="nothing but errors (the default)")
    g.add_argument("-v", "--verbose", action="store_true", help="TVM's RPC server logs")
    q = sub.add_parser("status", help="free/pending servers of a key on a tracker")
    q.add_argument("--tracker", required=True, help="HOST:PORT of the RPC tracker")
    q.add_argument("--key", default=DEFAULT_KEY, help=f"server key (default {DEFAULT_KEY})")
    q.add_argument("--timeout", type=seconds, default=5.0,
                   help="seconds to wait for the tracker to connect and to answer (default 5)")
    add_output_arguments(q, "the counts", progress=False)


def run(args) -> int:
    from tvm_plugin import rpc
    from tvm_plugin.rpc import check_tracker

    if args.rpc_cmd == "serve":
        from tvm_plugin.rpc.protocol import check_key

        check_key(args.key)  # before waiting for the tracker
        check_tracker(args.tracker, wait=60.0)  # a server may start just before its tracker
        return rpc.run_serve(args)
    out = Output(args)
    check_tracker(args.tracker, args.timeout)
    info = rpc.tracker_servers(args.tracker, args.key, timeout=args.timeout)
    out.print(f"key {args.key} on {args.tracker}: {info['free']} free, {info['pending']} pending")
    out.emit_json(info)
    return 0
