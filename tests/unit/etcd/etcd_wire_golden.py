#!/usr/bin/python3
"""The golden bytes of tests/unit/etcd/test_etcd_wire.cc and
test_gateway_json.cc: etcd's messages serialized by Google's protobuf
(python3-protobuf, and grpc_tools for protoc; neither is in CI), each
printed as hex with its proto3 JSON (the gateway's names:
preserving_proto_field_name). Run: /usr/bin/python3 tests/unit/etcd/etcd_wire_golden.py"""
import importlib
import os
import shutil
import sys
import tempfile

# etcd's field numbers (api/etcdserverpb/rpc.proto, api/mvccpb/kv.proto),
# trimmed to what the client uses; the *Future messages add fields a newer
# etcd might send, for the tests that unknown fields are skipped.
PROTO = """
syntax = "proto3";
package etcdserverpb;
message ResponseHeader { uint64 cluster_id = 1; uint64 member_id = 2; int64 revision = 3; uint64 raft_term = 4; }
message KeyValue { bytes key = 1; int64 create_revision = 2; int64 mod_revision = 3; int64 version = 4;
                   bytes value = 5; int64 lease = 6; }
message Event { enum EventType { PUT = 0; DELETE = 1; } EventType type = 1; KeyValue kv = 2; KeyValue prev_kv = 3; }
message RangeRequest { bytes key = 1; bytes range_end = 2; int64 limit = 3; int64 revision = 4;
                       bool serializable = 7; bool keys_only = 8; bool count_only = 9; }
message RangeResponse { ResponseHeader header = 1; repeated KeyValue kvs = 2; bool more = 3; int64 count = 4; }
message PutRequest { bytes key = 1; bytes value = 2; int64 lease = 3; bool prev_kv = 4; }
message PutResponse { ResponseHeader header = 1; KeyValue prev_kv = 2; }
message DeleteRangeRequest { bytes key = 1; bytes range_end = 2; bool prev_kv = 3; }
message DeleteRangeResponse { ResponseHeader header = 1; int64 deleted = 2; repeated KeyValue prev_kvs = 3; }
message RequestOp { oneof request { RangeRequest request_range = 1; PutRequest request_put = 2;
                    DeleteRangeRequest request_delete_range = 3; TxnRequest request_txn = 4; } }
message ResponseOp { oneof response { RangeResponse response_range = 1; PutResponse response_put = 2;
                     DeleteRangeResponse response_delete_range = 3; TxnResponse response_txn = 4; } }
message Compare {
  enum CompareResult { EQUAL = 0; GREATER = 1; LESS = 2; NOT_EQUAL = 3; }
  enum CompareTarget { VERSION = 0; CREATE = 1; MOD = 2; VALUE = 3; LEASE = 4; }
  CompareResult result = 1; CompareTarget target = 2; bytes key = 3;
  oneof target_union { int64 version = 4; int64 create_revision = 5; int64 mod_revision = 6; bytes value = 7;
                       int64 lease = 8; }
  bytes range_end = 64;
}
message TxnRequest { repeated Compare compare = 1; repeated RequestOp success = 2; repeated RequestOp failure = 3; }
message TxnResponse { ResponseHeader header = 1; bool succeeded = 2; repeated ResponseOp responses = 3; }
message WatchRequest { oneof request_union { WatchCreateRequest create_request = 1; } }
message WatchCreateRequest { bytes key = 1; bytes range_end = 2; int64 start_revision = 3; bool progress_notify = 4; }
message WatchResponse { ResponseHeader header = 1; int64 watch_id = 2; bool created = 3; bool canceled = 4;
                        int64 compact_revision = 5; string cancel_reason = 6; bool fragment = 7;
                        repeated Event events = 11; }
message LeaseGrantRequest { int64 TTL = 1; int64 ID = 2; }
message LeaseGrantResponse { ResponseHeader header = 1; int64 ID = 2; int64 TTL = 3; string error = 4; }
message LeaseRevokeRequest { int64 ID = 1; }
message LeaseKeepAliveRequest { int64 ID = 1; }
message LeaseKeepAliveResponse { ResponseHeader header = 1; int64 ID = 2; int64 TTL = 3; }
message AuthenticateRequest { string name = 1; string password = 2; }
message AuthenticateResponse { ResponseHeader header = 1; string token = 2; }
message StatusResponse { ResponseHeader header = 1; string version = 2; int64 dbSize = 3; uint64 leader = 4;
                         uint64 raftIndex = 5; uint64 raftTerm = 6; }
message ResponseHeaderFuture { uint64 cluster_id = 1; uint64 member_id = 2; int64 revision = 3; uint64 raft_term = 4;
                               string zone = 5; }
message RangeResponseFuture { ResponseHeaderFuture header = 1; repeated KeyValue kvs = 2; bool more = 3;
                              int64 count = 4; string note = 15; fixed64 stamp = 16; fixed32 small = 17;
                              ResponseHeader extra = 18; sint64 delta = 19; }
"""


def load():
    where = tempfile.mkdtemp()
    with open(os.path.join(where, "etcdgolden.proto"), "w") as f:
        f.write(PROTO)
    from grpc_tools import protoc
    if protoc.main(["protoc", f"-I{where}", f"--python_out={where}", os.path.join(where, "etcdgolden.proto")]) != 0:
        sys.exit("protoc failed")
    sys.path.insert(0, where)
    module = importlib.import_module("etcdgolden_pb2")
    sys.path.remove(where)
    shutil.rmtree(where)
    return module


pb = load()
from google.protobuf import json_format  # noqa: E402


def show(name, message):
    print(f"// {name}\n\"{message.SerializeToString().hex()}\"")
    print(json_format.MessageToJson(message, preserving_proto_field_name=True, indent=None))
    print()


H = pb.ResponseHeader
KV = pb.KeyValue
big = 13049071153751544597  # a member id beyond int64

# ---- requests
show("put /a", pb.PutRequest(key=b"/a", value=b"v\0w", lease=7))
show("put k empty", pb.PutRequest(key=b"k"))
show("put NUL ff lease -1", pb.PutRequest(key=b"k\0\xff", value=b"\xff", lease=-1))
show("range a b", pb.RangeRequest(key=b"a", range_end=b"b"))
show("range a", pb.RangeRequest(key=b"a"))
show("range count_only", pb.RangeRequest(key=b"a", range_end=b"b", count_only=True))
show("range keys_only", pb.RangeRequest(key=b"a", range_end=b"b", keys_only=True))
show("range at 9", pb.RangeRequest(key=b"k", revision=9))
show("range page", pb.RangeRequest(key=b"a", range_end=b"b", limit=2048))
show("range page at 17", pb.RangeRequest(key=b"a", range_end=b"b", limit=2048, revision=17))
show("delete k", pb.DeleteRangeRequest(key=b"k"))
show("delete all", pb.DeleteRangeRequest(key=b"\0", range_end=b"\0"))
C = pb.Compare
show("txn", pb.TxnRequest(
    compare=[C(result=C.EQUAL, target=C.VALUE, key=b"k", value=b"v"),
             C(result=C.LESS, target=C.CREATE, key=b"k", create_revision=3),
             C(result=C.GREATER, target=C.VERSION, key=b"k", version=1),
             C(result=C.NOT_EQUAL, target=C.MOD, key=b"k", mod_revision=9),
             C(result=C.EQUAL, target=C.CREATE, key=b"n", create_revision=0),
             C(result=C.EQUAL, target=C.VALUE, key=b"e", value=b"")],
    success=[pb.RequestOp(request_put=pb.PutRequest(key=b"k", value=b"n", lease=4)),
             pb.RequestOp(request_range=pb.RangeRequest(key=b"p/", range_end=b"p0"))],
    failure=[pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=b"k")),
             pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=b"\0", range_end=b"\0"))]))
show("txn nested", pb.TxnRequest(
    compare=[C(result=C.EQUAL, target=C.VERSION, key=b"c", version=2)],
    success=[pb.RequestOp(request_put=pb.PutRequest(key=b"c", value=b"3")),
             pb.RequestOp(request_txn=pb.TxnRequest(
                 compare=[C(result=C.EQUAL, target=C.MOD, key=b"r", mod_revision=3)],
                 success=[pb.RequestOp(request_put=pb.PutRequest(key=b"r", value=b"4"))],
                 failure=[pb.RequestOp(request_range=pb.RangeRequest(key=b"r"))]))]))
show("txn put empty", pb.TxnRequest(success=[pb.RequestOp(request_put=pb.PutRequest(key=b"k"))]))
show("lease grant 5", pb.LeaseGrantRequest(TTL=5))
show("lease id -3", pb.LeaseKeepAliveRequest(ID=-3))
show("lease id 77", pb.LeaseRevokeRequest(ID=77))
show("authenticate", pb.AuthenticateRequest(name="u", password="p"))
show("watch p q", pb.WatchRequest(create_request=pb.WatchCreateRequest(key=b"p", range_end=b"q", progress_notify=True)))
show("watch p 12", pb.WatchRequest(create_request=pb.WatchCreateRequest(key=b"p", start_revision=12,
                                                                        progress_notify=True)))

# ---- responses
show("range full", pb.RangeResponse(header=H(cluster_id=1, member_id=big, revision=42, raft_term=2),
                                    kvs=[KV(key=b"foo", create_revision=2, mod_revision=40, version=3, value=b"bar",
                                            lease=7)], count=1))
show("range absent", pb.RangeResponse(header=H(revision=5)))
show("range page more", pb.RangeResponse(header=H(revision=5),
                                         kvs=[KV(key=b"a\0\xff", create_revision=1, mod_revision=1, version=1),
                                              KV(key=b"b", value=b"\0")], more=True, count=3))
show("count", pb.RangeResponse(header=H(revision=41), count=1000))
show("range future", pb.RangeResponseFuture(
    header=pb.ResponseHeaderFuture(member_id=2, revision=6, zone="z"), kvs=[KV(key=b"k", value=b"v")], count=1,
    note="n", stamp=0x0102030405060708, small=9, extra=H(revision=99), delta=-2))
show("put", pb.PutResponse(header=H(cluster_id=1, member_id=222, revision=9, raft_term=3)))
show("delete", pb.DeleteRangeResponse(header=H(revision=9), deleted=3))
show("txn", pb.TxnResponse(header=H(revision=4), succeeded=True, responses=[
    pb.ResponseOp(response_range=pb.RangeResponse(header=H(revision=3), kvs=[KV(key=b"k", value=b"v", mod_revision=3)],
                                                  count=1)),
    pb.ResponseOp(response_put=pb.PutResponse(header=H(revision=4))),
    pb.ResponseOp(response_delete_range=pb.DeleteRangeResponse(header=H(revision=4), deleted=1)),
    pb.ResponseOp(response_txn=pb.TxnResponse(header=H(revision=4), succeeded=True,
                                              responses=[pb.ResponseOp(response_put=pb.PutResponse())]))]))
show("txn failed", pb.TxnResponse(header=H(revision=4), responses=[pb.ResponseOp(response_range=pb.RangeResponse())]))
show("lease grant", pb.LeaseGrantResponse(header=H(), ID=5986869437100460808, TTL=5))
show("lease grant error", pb.LeaseGrantResponse(ID=1, error="lessor: no space"))
show("keep alive", pb.LeaseKeepAliveResponse(header=H(revision=3), ID=1, TTL=5))
show("keep alive gone", pb.LeaseKeepAliveResponse(header=H(revision=3), ID=1))
show("token", pb.AuthenticateResponse(header=H(), token="abc.12"))
show("status", pb.StatusResponse(header=H(cluster_id=1, member_id=222, revision=5, raft_term=3), version="3.5.9",
                                 leader=big, raftTerm=3))
show("status no leader", pb.StatusResponse(header=H(member_id=222), version="3.5.9"))
show("watch created", pb.WatchResponse(header=H(revision=4), created=True))
show("watch events", pb.WatchResponse(header=H(revision=7), watch_id=1, events=[
    pb.Event(kv=KV(key=b"a", value=b"1", mod_revision=5, create_revision=5, version=1)),
    pb.Event(type=pb.Event.DELETE, kv=KV(key=b"b", mod_revision=6))]))
show("watch compacted", pb.WatchResponse(header=H(raft_term=2), canceled=True, compact_revision=5,
                                         cancel_reason="mvcc: required revision has been compacted"))
show("watch progress", pb.WatchResponse(header=H(revision=9)))
