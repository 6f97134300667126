#!/usr/bin/env python3
"""A CRI client for tests/suite/cri.rs: one gRPC call to a CRI runtime, as the kubelet makes it.

    cri.py STUBS SOCKET Service.Method < request.json > response.json

STUBS: a directory with runtime_v1_pb2.py and runtime_v1_pb2_grpc.py, generated from
tests/cri/runtime_v1.proto (our subset of CRI runtime.v1) by `python3 -m grpc_tools.protoc`. SOCKET: the runtime's unix socket. Service:
RuntimeService or ImageService. The request and the response are the messages in protobuf's
JSON mapping (proto field names accepted and written). A failed call prints its gRPC status
code and details on stderr and exits 1.
"""

import json
import os
import sys


def main():
    stubs, socket, method = sys.argv[1:4]
    sys.path.insert(0, stubs)
    import grpc
    from google.protobuf import json_format

    import runtime_v1_pb2 as pb
    import runtime_v1_pb2_grpc as pb_grpc

    service, name = method.split(".")
    desc = pb.DESCRIPTOR.services_by_name[service].methods_by_name[name]
    request = json_format.ParseDict(json.load(sys.stdin), getattr(pb, desc.input_type.name)())
    with grpc.insecure_channel("unix://" + os.path.abspath(socket)) as channel:
        stub = getattr(pb_grpc, service + "Stub")(channel)
        try:
            response = getattr(stub, name)(request, timeout=120)
        except grpc.RpcError as e:
            print(f"{method}: {e.code().name}: {e.details()}", file=sys.stderr)
            return 1
    json.dump(json_format.MessageToDict(response, preserving_proto_field_name=True), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
