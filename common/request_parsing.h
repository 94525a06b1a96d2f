// Request parsing in Tandem code instead of gRPC's generated handlers.
//
// gRPC 1.51 (Debian 12) parses a request before any service code runs and answers a
// malformed one (garbage bytes, a truncated varint, invalid UTF-8 in a proto3 string)
// with INTERNAL and an empty message. Its unary handlers parse through
// grpc::SerializationTraits<protobuf::MessageLite>, shared by every message of the
// process, so a per-type SerializationTraits cannot change that. ParsingService
// instead re-registers each method of a generated synchronous service with a handler
// that receives the raw bytes (the hook the generated WithStreamedUnaryMethod_ uses),
// parses them with ParseRequest and then calls the typed method: a malformed request
// answers INVALID_ARGUMENT "request could not be parsed as <type>: <reason>". The wire
// protocol is unchanged (clients see ordinary unary and server-streaming calls).
// The hook (Service::MarkMethodStreamed, grpc::internal::BidiStreamingHandler) is the
// one gRPC's own generated code uses; request_parsing_test checks it on each upgrade.
// Parsing comes before any method code, authentication included, as it did before.
#ifndef TANDEM_COMMON_REQUEST_PARSING_H_
#define TANDEM_COMMON_REQUEST_PARSING_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/method_handler.h>

#include <string>

#include "absl/strings/string_view.h"

namespace tandem {

// Why `bytes` is not a valid protobuf binary serialization of a `type` message (wire
// format, nesting up to 100 levels, UTF-8 of proto3 string fields), naming the byte
// offset and the field, e.g. "field tandem.v1.GenerateRequest.text (2) is not valid
// UTF-8". Empty when no reason is found.
std::string DescribeParseError(absl::string_view bytes, const google::protobuf::Descriptor& type);

// Parses `bytes` into `message` and clears `bytes`. OK, or INVALID_ARGUMENT "request
// could not be parsed as <full message name>: <reason>".
grpc::Status ParseRequest(grpc::ByteBuffer* bytes, google::protobuf::Message* message);

// Reads the one request message of a call and parses it (INVALID_ARGUMENT when there
// is none or it does not parse).
grpc::Status ReadRequest(grpc::internal::ReaderInterface<grpc::ByteBuffer>* stream,
                         google::protobuf::Message* message);

// What a server-streaming method writes its responses to (Write() returns false once
// the client is gone).
template <class Response>
using ResponseWriter = grpc::internal::WriterInterface<Response>;

// Index of method `method` of service `service` (full name) in its generated
// service, checked against the descriptor pool: aborts, naming the mismatch, when the
// method does not exist, is client-streaming, or differs in request type or
// server-streaming kind. (ParsingService's non-template half.)
int ParsedMethodIndex(const char* service, const char* method,
                      const google::protobuf::Descriptor& request, bool server_streaming);
// Aborts unless `routed` equals the number of methods of `service`.
void CheckEveryMethodRouted(const char* service, int routed);

// Base of a Tandem implementation of generated service `Grpc` (e.g. v1::Worker). The
// derived class's constructor routes every method of the service through
// ParseRequest with ParseUnary / ParseServerStreaming, then calls
// CheckEveryMethodParsed(). A method name, request type or streaming kind that does
// not match the service's descriptor aborts at construction.
template <class Grpc>
class ParsingService : public Grpc::Service {
 protected:
  template <class Self, class Request, class Response>
  using UnaryMethod = grpc::Status (Self::*)(grpc::ServerContext*, const Request*, Response*);
  template <class Self, class Request, class Response>
  using StreamingMethod = grpc::Status (Self::*)(grpc::ServerContext*, const Request*,
                                                 ResponseWriter<Response>*);

  // Unary method `name` runs `method` of `self` (which must be `this`).
  template <class Self, class Request, class Response>
  void ParseUnary(Self* self, const char* name, UnaryMethod<Self, Request, Response> method) {
    using Stream = grpc::ServerReaderWriter<Response, grpc::ByteBuffer>;
    auto run = [method](Self* service, grpc::ServerContext* context, Stream* stream) {
      Request request;
      grpc::Status status = ReadRequest(stream, &request);
      if (!status.ok()) return status;
      Response response;
      status = (service->*method)(context, &request, &response);
      if (status.ok()) stream->WriteLast(response, grpc::WriteOptions());
      return status;
    };
    Route(name, *Request::descriptor(), /*server_streaming=*/false,
          new grpc::internal::BidiStreamingHandler<Self, grpc::ByteBuffer, Response>(run, self));
  }

  // Server-streaming method `name` runs `method` of `self` (which must be `this`).
  template <class Self, class Request, class Response>
  void ParseServerStreaming(Self* self, const char* name,
                            StreamingMethod<Self, Request, Response> method) {
    using Stream = grpc::ServerReaderWriter<Response, grpc::ByteBuffer>;
    auto run = [method](Self* service, grpc::ServerContext* context, Stream* stream) {
      Request request;
      grpc::Status status = ReadRequest(stream, &request);
      if (!status.ok()) return status;
      return (service->*method)(context, &request, stream);
    };
    Route(name, *Request::descriptor(), /*server_streaming=*/true,
          new grpc::internal::BidiStreamingHandler<Self, grpc::ByteBuffer, Response>(run, self));
  }

  // Aborts unless every method of the service has been routed.
  void CheckEveryMethodParsed() const {
    CheckEveryMethodRouted(Grpc::service_full_name(), routed_);
  }

 private:
  void Route(const char* name, const google::protobuf::Descriptor& request, bool server_streaming,
             grpc::internal::MethodHandler* handler) {
    const int index = ParsedMethodIndex(Grpc::service_full_name(), name, request, server_streaming);
    this->MarkMethodStreamed(index, handler);  // Takes ownership of `handler`.
    ++routed_;
  }

  int routed_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_REQUEST_PARSING_H_
