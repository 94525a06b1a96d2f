#include "common/request_parsing.h"

#include <glog/logging.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/utf8.h"

namespace tandem {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

constexpr int kMaxDepth = 100;  // Protobuf's default recursion limit.

// Walks a serialized message field by field and records the first reason it is
// malformed. Offsets are from the start of the request.
class ParseDiagnosis {
 public:
  explicit ParseDiagnosis(absl::string_view bytes)
      : in_(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size())) {
    in_.PushLimit(static_cast<int>(bytes.size()));  // Every walk runs under a limit.
  }

  // Walks a message of `type` up to the current limit; false with error() set when
  // something is malformed.
  bool Message(const Descriptor& type, int depth) {
    if (depth > kMaxDepth) return Fail(absl::StrCat("messages nested deeper than ", kMaxDepth));
    while (in_.BytesUntilLimit() != 0) {
      const int at = in_.CurrentPosition();
      uint32_t tag = 0;
      if (!in_.ReadVarint32(&tag)) return Fail(absl::StrCat("malformed field tag at byte ", at));
      const int number = static_cast<int>(tag >> 3);
      const int wire = static_cast<int>(tag & 7);
      if (number == 0) return Fail(absl::StrCat("field number 0 at byte ", at));
      if (wire > 5) return Fail(absl::StrCat("invalid wire type ", wire, " at byte ", at));
      if (wire == WireFormatLite::WIRETYPE_END_GROUP) {
        return Fail(absl::StrCat("end-group tag without a group at byte ", at));
      }
      const FieldDescriptor* field = type.FindFieldByNumber(number);
      const std::string name = field != nullptr
                                   ? absl::StrCat("field ", field->full_name(), " (", number, ")")
                                   : absl::StrCat("unknown field ", number);
      if (!Value(field, name, tag, at, depth)) return false;
    }
    return true;
  }

  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string reason) {
    error_ = std::move(reason);
    return false;
  }

  // One field value after its tag at byte `at`.
  bool Value(const FieldDescriptor* field, const std::string& name, uint32_t tag, int at,
             int depth) {
    uint64_t scalar = 0;
    uint32_t fixed32 = 0;
    switch (tag & 7) {
      case WireFormatLite::WIRETYPE_VARINT:
        if (in_.ReadVarint64(&scalar)) return true;
        return Fail(absl::StrCat(name, " at byte ", at,
                                 ": truncated varint (or one longer than 10 bytes)"));
      case WireFormatLite::WIRETYPE_FIXED64:
        if (in_.ReadLittleEndian64(&scalar)) return true;
        return Fail(absl::StrCat(name, " at byte ", at, ": 8-byte value cut short"));
      case WireFormatLite::WIRETYPE_FIXED32:
        if (in_.ReadLittleEndian32(&fixed32)) return true;
        return Fail(absl::StrCat(name, " at byte ", at, ": 4-byte value cut short"));
      case WireFormatLite::WIRETYPE_START_GROUP:
        if (WireFormatLite::SkipField(&in_, tag)) return true;
        return Fail(absl::StrCat(name, " at byte ", at, ": group without its end-group tag"));
      default:
        return Delimited(field, name, at, depth);
    }
  }

  // A length-delimited value: string, bytes, sub-message or packed repeated scalars
  // when `field` says so (a field of another type with this wire type is unknown).
  bool Delimited(const FieldDescriptor* field, const std::string& name, int at, int depth) {
    uint32_t length = 0;
    if (!in_.ReadVarint32(&length)) {
      return Fail(absl::StrCat(name, " at byte ", at, ": malformed length"));
    }
    const int left = in_.BytesUntilLimit();
    if (length > static_cast<uint32_t>(left)) {
      return Fail(absl::StrCat(name, " at byte ", at, ": length ", length,
                               " runs past the end of its message (", left, " bytes left)"));
    }
    const int start = in_.CurrentPosition();
    const CodedInputStream::Limit limit = in_.PushLimit(static_cast<int>(length));
    bool ok = true;
    if (field == nullptr) {
      ok = in_.Skip(static_cast<int>(length));
    } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      ok = Message(*field->message_type(), depth + 1);
    } else if (field->type() == FieldDescriptor::TYPE_STRING &&
               field->file()->syntax() == google::protobuf::FileDescriptor::SYNTAX_PROTO3) {
      std::string text;
      ok = in_.ReadString(&text, static_cast<int>(length));
      const size_t bad = coordinator::FindInvalidUtf8(text);
      if (ok && bad != absl::string_view::npos) {
        ok = Fail(absl::StrCat(name, " is not valid UTF-8 (byte ", start + bad, ")"));
      }
    } else if (field->is_packable()) {
      ok = Packed(*field, name);
    } else {
      ok = in_.Skip(static_cast<int>(length));
    }
    in_.PopLimit(limit);
    return ok;
  }

  // The elements of a packed repeated scalar field, up to the current limit.
  bool Packed(const FieldDescriptor& field, const std::string& name) {
    const WireFormatLite::WireType wire =
        WireFormatLite::WireTypeForFieldType(static_cast<WireFormatLite::FieldType>(field.type()));
    const int size = wire == WireFormatLite::WIRETYPE_FIXED64   ? 8
                     : wire == WireFormatLite::WIRETYPE_FIXED32 ? 4
                                                                : 0;
    if (size > 0) {
      if (in_.BytesUntilLimit() % size == 0) return in_.Skip(in_.BytesUntilLimit());
      return Fail(absl::StrCat("packed ", name, ": ", in_.BytesUntilLimit(),
                               " bytes is not a whole number of ", size, "-byte values"));
    }
    while (in_.BytesUntilLimit() > 0) {
      const int at = in_.CurrentPosition();
      uint64_t value = 0;
      if (!in_.ReadVarint64(&value)) {
        return Fail(absl::StrCat("packed ", name, ": truncated varint at byte ", at));
      }
    }
    return true;
  }

  CodedInputStream in_;
  std::string error_;
};

}  // namespace

std::string DescribeParseError(absl::string_view bytes, const Descriptor& type) {
  ParseDiagnosis diagnosis(bytes);
  if (diagnosis.Message(type, 0)) return "";
  return diagnosis.error();
}

grpc::Status ParseRequest(grpc::ByteBuffer* bytes, google::protobuf::Message* message) {
  bool parsed = false;
  {
    grpc::ProtoBufferReader reader(bytes);
    parsed = reader.status().ok() && message->ParseFromZeroCopyStream(&reader);
  }
  if (parsed) {
    bytes->Clear();
    return grpc::Status::OK;
  }
  std::string reason = "the bytes are not a valid protobuf encoding";
  grpc::Slice flat;
  if (bytes->DumpToSingleSlice(&flat).ok()) {
    std::string found = DescribeParseError(
        absl::string_view(reinterpret_cast<const char*>(flat.begin()), flat.size()),
        *message->GetDescriptor());
    if (!found.empty()) reason = std::move(found);
  }
  bytes->Clear();
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat("request could not be parsed as ",
                                   message->GetDescriptor()->full_name(), ": ", reason));
}

grpc::Status ReadRequest(grpc::internal::ReaderInterface<grpc::ByteBuffer>* stream,
                         google::protobuf::Message* message) {
  grpc::ByteBuffer bytes;
  if (!stream->Read(&bytes)) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("request could not be parsed as ", message->GetDescriptor()->full_name(),
                     ": no request message"));
  }
  return ParseRequest(&bytes, message);
}

int ParsedMethodIndex(const char* service, const char* method, const Descriptor& request,
                      bool server_streaming) {
  const google::protobuf::ServiceDescriptor* s =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
  CHECK(s != nullptr) << "no service " << service << " in the descriptor pool";
  const google::protobuf::MethodDescriptor* m = s->FindMethodByName(method);
  CHECK(m != nullptr) << service << " has no method " << method;
  CHECK(m->input_type() == &request)
      << service << "." << method << " takes " << m->input_type()->full_name() << ", not "
      << request.full_name();
  CHECK(!m->client_streaming() && m->server_streaming() == server_streaming)
      << service << "." << method << " is routed with the wrong streaming kind";
  return m->index();
}

void CheckEveryMethodRouted(const char* service, int routed) {
  const google::protobuf::ServiceDescriptor* s =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
  CHECK(s != nullptr) << "no service " << service << " in the descriptor pool";
  CHECK_EQ(routed, s->method_count())
      << "not every method of " << service << " parses its requests in Tandem code";
}

}  // namespace tandem
