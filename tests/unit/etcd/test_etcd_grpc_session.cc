// The pure parts of the gRPC session: grpc-message's percent-decoding and
// the status an answer that is not HTTP 200 stands for.
#include "etcd/grpc_session.h"

#include <catch2/catch.hpp>

using cxxrun::etcd::grpc_code_for_http;
using cxxrun::etcd::percent_decode;

TEST_CASE("grpc session: grpc-message is percent-decoded, a malformed escape kept as it came", "[etcd][grpc]") {
  CHECK(percent_decode("etcdserver: no leader") == "etcdserver: no leader");
  CHECK(percent_decode("100%25 sure") == "100% sure");
  CHECK(percent_decode("na%C3%AFve%0Aline") == "na\xc3\xafve\nline");
  CHECK(percent_decode("%e2%9c%93") == "\xe2\x9c\x93");
  CHECK(percent_decode("50%") == "50%");
  CHECK(percent_decode("%4") == "%4");
  CHECK(percent_decode("%zz%41") == "%zzA");
}

TEST_CASE("grpc session: an HTTP status other than 200 as gRPC maps it", "[etcd][grpc]") {
  CHECK(grpc_code_for_http(400) == 13);
  CHECK(grpc_code_for_http(401) == 16);
  CHECK(grpc_code_for_http(403) == 7);
  CHECK(grpc_code_for_http(404) == 12);
  for (int status : {429, 502, 503, 504}) CHECK(grpc_code_for_http(status) == 14);
  CHECK(grpc_code_for_http(500) == 2);
  CHECK(grpc_code_for_http(302) == 2);
}
