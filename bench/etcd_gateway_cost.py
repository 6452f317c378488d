#!/usr/bin/env python3
"""What etcd's JSON gateway costs etcd, against its gRPC API: the same puts
and ranges, sent over each, to a private 3-member cluster
(tests/integration/etcd_cluster.py), and the members' CPU seconds per
request (utime + stime of the three processes, before and after).

cxxrun's etcd client speaks the v3 JSON gateway (docs/etcd-client.md); etcd
serves each such request by decoding its JSON and sending it to its own gRPC
server over a connection to itself. The recovery of 1,000 agents is bound by
the members' CPU (bench/RESULTS.md), so this says what a gRPC transport
would save per request.

Needs python3-grpcio and python3-grpc-tools, which scripts/install-deps.sh
does not install (only this measurement uses them):
    apt-get install python3-grpcio python3-grpc-tools
    /usr/bin/python3 bench/etcd_gateway_cost.py [--requests N] [--clients C] [--runs R]
"""
import argparse
import asyncio
import base64
import http.client
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from etcd_cluster import EtcdCluster  # noqa: E402

# The messages used here, with etcd's field numbers (api/etcdserverpb/rpc.proto,
# api/mvccpb/kv.proto): what the wire needs, nothing of gogoproto's.
PROTO = """
syntax = "proto3";
package etcdserverpb;
message ResponseHeader { uint64 cluster_id = 1; uint64 member_id = 2; int64 revision = 3; uint64 raft_term = 4; }
message KeyValue { bytes key = 1; int64 create_revision = 2; int64 mod_revision = 3; int64 version = 4;
                   bytes value = 5; int64 lease = 6; }
message PutRequest { bytes key = 1; bytes value = 2; int64 lease = 3; }
message PutResponse { ResponseHeader header = 1; }
message RangeRequest { bytes key = 1; bytes range_end = 2; int64 limit = 3; int64 revision = 4; }
message RangeResponse { ResponseHeader header = 1; repeated KeyValue kvs = 2; bool more = 3; int64 count = 4; }
service KV {
  rpc Range(RangeRequest) returns (RangeResponse) {}
  rpc Put(PutRequest) returns (PutResponse) {}
}
"""


def stubs(where):
    if importlib.util.find_spec("grpc") is None or importlib.util.find_spec("grpc_tools") is None:
        sys.exit("etcd_gateway_cost: needs python3-grpcio and python3-grpc-tools (apt-get install them)")
    from grpc_tools import protoc
    with open(os.path.join(where, "etcdrpc.proto"), "w") as f:
        f.write(PROTO)
    if protoc.main(["protoc", f"-I{where}", f"--python_out={where}", f"--grpc_python_out={where}",
                    os.path.join(where, "etcdrpc.proto")]) != 0:
        sys.exit("etcd_gateway_cost: protoc failed")
    sys.path.insert(0, where)
    import etcdrpc_pb2
    import etcdrpc_pb2_grpc
    return etcdrpc_pb2, etcdrpc_pb2_grpc


def b64(text):
    return base64.b64encode(text.encode()).decode()


def gateway(cluster, kind, keys, clients):
    """`keys` spread over `clients` threads, each with a kept-alive HTTP/1.1
    connection to member (thread mod 3), as cxxrun's client holds one."""
    def work(i):
        m = cluster.members[i % len(cluster.members)]
        conn = http.client.HTTPConnection("127.0.0.1", m.client_port, timeout=30)
        for k in keys[i::clients]:
            if kind == "put":
                body, path = json.dumps({"key": b64(k), "value": b64("v" * 40)}), "/v3/kv/put"
            else:
                body, path = json.dumps({"key": b64(k)}), "/v3/kv/range"
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                raise RuntimeError(f"{path}: HTTP {r.status}")
        conn.close()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def grpc_api(cluster, kind, keys, clients, pb, rpc):
    import grpc

    async def main():
        channels = [grpc.aio.insecure_channel(m.endpoint) for m in cluster.members]
        stubs_ = [rpc.KVStub(c) for c in channels]

        async def work(i):
            stub = stubs_[i % len(stubs_)]
            for k in keys[i::clients]:
                if kind == "put":
                    await stub.Put(pb.PutRequest(key=k.encode(), value=b"v" * 40))
                else:
                    await stub.Range(pb.RangeRequest(key=k.encode()))
        await asyncio.gather(*(work(i) for i in range(clients)))
        for c in channels:
            await c.close()
    asyncio.run(main())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=6000, help="requests of each kind per run")
    ap.add_argument("--clients", type=int, default=48, help="concurrent clients")
    ap.add_argument("--runs", type=int, default=3, help="runs of each transport, alternating")
    args = ap.parse_args()
    for name in ("requests", "clients", "runs"):
        if getattr(args, name) < 1:
            print(f"etcd_gateway_cost: --{name} {getattr(args, name)}: must be at least 1", file=sys.stderr)
            sys.exit(2)
    with tempfile.TemporaryDirectory(prefix="cxxrun_gw_") as where:
        pb, rpc = stubs(where)
        cluster = EtcdCluster(3)
        cluster.start()
        try:
            results = {}
            for run in range(args.runs):
                for transport in ("gateway", "grpc"):
                    for kind in ("put", "range"):
                        keys = [f"cost/{transport}/{run}/{i}" for i in range(args.requests)]
                        before, start = sum(cluster.cpu_seconds()), time.monotonic()
                        if transport == "gateway":
                            gateway(cluster, kind, keys, args.clients)
                        else:
                            grpc_api(cluster, kind, keys, args.clients, pb, rpc)
                        wall, cpu = time.monotonic() - start, sum(cluster.cpu_seconds()) - before
                        results.setdefault((transport, kind), []).append((cpu / args.requests * 1e6, wall))
        finally:
            cluster.stop()
    print(f"| {args.requests} requests, {args.clients} clients, 3 members (median of {args.runs}) "
          "| members' CPU per request | requests/s |")
    print("|---|---:|---:|")
    for (transport, kind), samples in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        cpu = statistics.median(s[0] for s in samples)
        rate = statistics.median(args.requests / s[1] for s in samples)
        print(f"| {kind}, {transport} | {cpu:.0f} µs | {rate:.0f} |")


if __name__ == "__main__":
    main()
