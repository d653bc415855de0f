// idem::grpc: the protobuf codec, the status mapping, and GrpcGuard end to end over real gRPC on
// 127.0.0.1 (the example's payments service, with the synchronous and the callback API), and the
// example's server SIGKILLed and restarted on its SQLite file.
#include <google/protobuf/any.pb.h>
#include <google/protobuf/duration.pb.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/test/server_context_test_spouse.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <idem/codecs/protobuf.hpp>
#include <idem/grpc.hpp>
#include <idem/memory/admin.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "grpc_support.hpp"

namespace {

using namespace std::chrono_literals;
using namespace grpc_test;

// The retry_delay, in ms, of the google.rpc.RetryInfo detail in a google.rpc.Status's bytes (read
// without its generated code); -1 when there is none.
long long retry_info_ms(const std::string& status_bytes) {
  using google::protobuf::UnknownField;
  google::protobuf::UnknownFieldSet status;
  if (!status.ParseFromString(status_bytes)) return -1;
  for (int i = 0; i < status.field_count(); ++i) {
    const UnknownField& detail = status.field(i);
    google::protobuf::Any any;
    if (detail.number() != 3 || detail.type() != UnknownField::TYPE_LENGTH_DELIMITED ||
        !any.ParseFromString(detail.length_delimited()) ||
        any.type_url() != idem::kGrpcRetryInfoType) {
      continue;
    }
    google::protobuf::UnknownFieldSet retry_info;
    if (!retry_info.ParseFromString(any.value()) || retry_info.field_count() != 1) return -1;
    google::protobuf::Duration delay;
    if (!delay.ParseFromString(retry_info.field(0).length_delimited())) return -1;
    return delay.seconds() * 1000 + delay.nanos() / 1000000;
  }
  return -1;
}

// The reason of the DeclineReason detail in a google.rpc.Status's bytes (read without the
// status's generated code), or "" when the bytes are no such status.
std::string decline_reason(const std::string& status_bytes) {
  using google::protobuf::UnknownField;
  google::protobuf::UnknownFieldSet status;
  if (!status.ParseFromString(status_bytes)) return {};
  for (int i = 0; i < status.field_count(); ++i) {
    const UnknownField& detail = status.field(i);
    google::protobuf::Any any;
    v1::DeclineReason reason;
    if (detail.number() == 3 && detail.type() == UnknownField::TYPE_LENGTH_DELIMITED &&
        any.ParseFromString(detail.length_delimited()) &&
        any.type_url() == payments::Charger::kDeclineReasonType &&
        reason.ParseFromString(any.value())) {
      return reason.reason();
    }
  }
  return {};
}

// ---- The protobuf codec ------------------------------------------------------------------------

using ReceiptCodec = idem::codec<v1::Receipt>;

v1::Receipt receipt_with_labels(int n, bool reverse) {
  v1::Receipt r;
  r.set_payment_id("pay_1");
  r.set_amount_cents(1999);
  r.set_currency("EUR");
  for (int i = 0; i < n; ++i) {
    const int k = reverse ? n - 1 - i : i;
    (*r.mutable_labels())["label-" + std::to_string(k)] = std::to_string(k * 7);
  }
  return r;
}

TEST(ProtobufCodec, RoundTripsAMessageExactly) {
  const v1::Receipt r = receipt_with_labels(5, false);
  const v1::Receipt back = ReceiptCodec::decode(ReceiptCodec::encode(r));
  EXPECT_EQ(back.payment_id(), "pay_1");
  EXPECT_EQ(back.amount_cents(), 1999);
  EXPECT_EQ(back.labels().size(), 5U);
  EXPECT_EQ(back.labels().at("label-3"), "21");
  EXPECT_EQ(ReceiptCodec::encode(back), ReceiptCodec::encode(r));
  // The empty message is a value too: zero bytes that replay as itself.
  EXPECT_EQ(ReceiptCodec::encode(v1::Receipt{}), "");
  EXPECT_EQ(ReceiptCodec::decode("").payment_id(), "");
}

TEST(ProtobufCodec, OneMessageHasOneEncodingWhateverOrderItsMapWasFilledIn) {
  const std::string forward = ReceiptCodec::encode(receipt_with_labels(64, false));
  const std::string backward = ReceiptCodec::encode(receipt_with_labels(64, true));
  EXPECT_EQ(forward, backward);
  EXPECT_EQ(idem::protobuf::deterministic_bytes(receipt_with_labels(64, true)), forward);
}

TEST(ProtobufCodec, BytesThatAreNotTheMessageAreRecordCorruptNamingItsType) {
  const std::string good = ReceiptCodec::encode(receipt_with_labels(3, false));
  for (const std::string& bad : {std::string("\xff\xff\xff", 3), good.substr(0, good.size() - 1),
                                 std::string("\x0a\x7f", 2)}) {
    try {
      (void)ReceiptCodec::decode(bad);
      ADD_FAILURE() << "decoded " << bad.size() << " corrupt bytes";
    } catch (const idem::Error& e) {
      EXPECT_EQ(e.code(), idem::errc::record_corrupt);
      EXPECT_NE(std::string(e.what()).find("payments.v1.Receipt"), std::string::npos) << e.what();
    }
  }
}

TEST(ProtobufCodec, AGuardReplaysAMessageResult) {
  idem::MemoryStore store;
  idem::IdempotencyGuard guard{store, idem::Options{.scope = "codec"}};
  int runs = 0;
  auto handler = [&] {
    ++runs;
    return receipt_with_labels(4, false);
  };
  auto first = guard.execute("k", "payload", handler);
  auto again = guard.execute("k", "payload", handler);
  ASSERT_TRUE(first.recorded());
  ASSERT_TRUE(again.replayed());
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(ReceiptCodec::encode(again.value()), ReceiptCodec::encode(first.value()));
}

// ---- The status mapping and the options ------------------------------------------------------

TEST(GrpcStatus, EachCodeMapsAsDocumented) {
  using grpc::StatusCode;
  using idem::errc;
  const std::vector<std::pair<errc, StatusCode>> table{
      {errc::key_invalid, StatusCode::INVALID_ARGUMENT},
      {errc::payload_mismatch, StatusCode::FAILED_PRECONDITION},
      {errc::in_progress, StatusCode::ABORTED},
      {errc::token_invalid, StatusCode::INVALID_ARGUMENT},
      {errc::invalid_transition, StatusCode::FAILED_PRECONDITION},
      {errc::version_conflict, StatusCode::ABORTED},
      {errc::lease_lost, StatusCode::ABORTED},
      {errc::store_unavailable, StatusCode::UNAVAILABLE},
      {errc::result_too_large, StatusCode::INTERNAL},
      {errc::handler_failed, StatusCode::INTERNAL},
      {errc::handler_aborted, StatusCode::ABORTED},
      {errc::step_mismatch, StatusCode::INTERNAL},
      {errc::config_invalid, StatusCode::INTERNAL},
      {errc::record_corrupt, StatusCode::DATA_LOSS},
      {errc::outcome_unknown, StatusCode::UNAVAILABLE},
  };
  for (const auto& [code, status] : table) {
    EXPECT_EQ(idem::grpc_status(code), status) << idem::to_string(code);
    // The codes a client may retry are those of the errors idem says a retry can fix.
    EXPECT_EQ(idem::grpc_retryable(idem::grpc_status(code)),
              idem::is_retryable(idem::make_error_code(code)))
        << idem::to_string(code);
  }
  EXPECT_EQ(idem::grpc_status(std::error_code{}), StatusCode::OK);
  EXPECT_EQ(idem::grpc_status(std::make_error_code(std::errc::io_error)), StatusCode::INTERNAL);
}

TEST(GrpcOptions, AKeyEntryGrpcCannotCarryAsTextIsRefusedAtConstruction) {
  idem::MemoryStore store;
  idem::IdempotencyGuard guard{store};
  using Rpc = idem::GrpcGuard<idem::IdempotencyGuard<idem::MemoryStore>>;
  for (const char* name : {"Idempotency-Key", "idempotency-key-bin", "grpc-key", "", "key name"}) {
    EXPECT_THROW(Rpc(guard, idem::GrpcOptions{.key_metadata = name}), std::invalid_argument)
        << name;
  }
  EXPECT_NO_THROW(Rpc(guard, idem::GrpcOptions{.key_metadata = "x-request-id"}));
}

// A certificate's names are one principal: two lists of names never give the same one (a name
// holding the separator or the escape), and names without either read as they are.
TEST(GrpcPrincipal, PeerNamesJoinSoThatTwoListsNeverMeet) {
  using Names = std::vector<grpc::string_ref>;
  const auto principal = [](const Names& names) {
    return idem::detail::peer_identity_principal(names);
  };
  EXPECT_EQ(principal({"svc.example"}), "svc.example");
  EXPECT_EQ(principal({"a.example", "b.example"}), "a.example,b.example");
  const std::vector<Names> lists{{"a", "b"},     {"a,b"},        {"a\\", "b"},   {"a\\,b"},
                                 {"a", ",b"},    {"a,", "b"},    {"a", "", "b"}, {"a,,b"},
                                 {"a\\\\", "b"}, {"a", "b", ""}, {"a", "b,"}};
  std::set<std::string> seen;
  for (const Names& names : lists) {
    EXPECT_TRUE(seen.insert(principal(names)).second) << principal(names);
  }
}

// ---- The synchronous wrapper on a context made here (no network) ------------------------------

using MemoryGuard = idem::IdempotencyGuard<idem::MemoryStore>;
using MemoryRpc = idem::GrpcGuard<MemoryGuard>;

// A server context with the given client metadata (gRPC's test spouse), as a call would have it.
struct Call {
  explicit Call(const Metadata& metadata) : spouse(&context) {
    for (const auto& [name, value] : metadata) spouse.AddClientMetadata(name, value);
  }
  bool replayed() const {
    const auto trailers = spouse.GetTrailingMetadata();
    const auto it = trailers.find(std::string(idem::kGrpcReplayedMetadata));
    return it != trailers.end() && it->second == "true";
  }
  grpc::ServerContext context;
  grpc::testing::ServerContextTestSpouse spouse;
  v1::Receipt receipt;
};

class GrpcWrapper : public ::testing::Test {
 protected:
  idem::MemoryStore store;
  MemoryGuard guard{store, idem::Options{.scope = "wrapper"}};
  MemoryRpc rpc{guard};
  v1::ChargeRequest request = request_of(1999);
  int runs = 0;

  template <class Handler>
  grpc::Status call(Call& c, Handler handler) {
    return rpc.unary(c.context, request, c.receipt, [&](v1::Receipt& out) {
      ++runs;
      return handler(out);
    });
  }
};

// The key was released: ABORTED, a code a client's retry policy retries (handler_aborted).
TEST_F(GrpcWrapper, AHandlerThatThrowsReleasesTheKeyAndAnswersAborted) {
  Call first(keyed("k"));
  const grpc::Status threw = call(
      first, [](v1::Receipt&) -> grpc::Status { throw std::runtime_error("provider timeout"); });
  EXPECT_EQ(threw.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_TRUE(idem::grpc_retryable(threw.error_code()));
  EXPECT_NE(threw.error_message().find("provider timeout"), std::string::npos);
  Call retry(keyed("k"));
  EXPECT_TRUE(call(retry, [](v1::Receipt& out) {
                out.set_payment_id("pay_2");
                return grpc::Status::OK;
              }).ok());
  EXPECT_FALSE(retry.replayed());
  EXPECT_EQ(runs, 2);
}

TEST_F(GrpcWrapper, AReleaseCodeLetsARetryRunAgainAndOtherCodesReplay) {
  Call busy(keyed("k"));
  EXPECT_EQ(call(busy,
                 [](v1::Receipt&) {
                   return grpc::Status(grpc::StatusCode::UNAVAILABLE, "provider down");
                 })
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
  Call missing(keyed("k"));
  EXPECT_EQ(
      call(missing,
           [](v1::Receipt&) { return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such card"); })
          .error_code(),
      grpc::StatusCode::NOT_FOUND);
  Call again(keyed("k"));
  const grpc::Status replay = call(again, [](v1::Receipt&) { return grpc::Status::OK; });
  EXPECT_EQ(replay.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(replay.error_message(), "no such card");
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(runs, 2);
}

TEST_F(GrpcWrapper, WithoutARequiredKeyACallRunsUnguarded) {
  MemoryRpc optional{guard, idem::GrpcOptions{.require_key = false}};
  for (int i = 0; i < 2; ++i) {
    Call c(Metadata{{"x-tenant", "t"}});
    EXPECT_TRUE(optional
                    .unary(c.context, request, c.receipt,
                           [&](v1::Receipt&) {
                             ++runs;
                             return grpc::Status::OK;
                           })
                    .ok());
    EXPECT_FALSE(c.replayed());
  }
  EXPECT_EQ(runs, 2);
}

// A principal function of the service's own refuses a call by throwing idem::Error: its code's
// status and message, and the handler does not run.
TEST_F(GrpcWrapper, APrincipalFunctionThatThrowsAnErrorRefusesTheCall) {
  MemoryRpc strict{
      guard, idem::GrpcOptions{.principal = [](const grpc::ServerContextBase&) -> std::string {
        throw idem::Error(idem::make_error_code(idem::errc::key_invalid),
                          "no authenticated tenant");
      }}};
  Call c(keyed("k"));
  const grpc::Status s = strict.unary(c.context, request, c.receipt, [&](v1::Receipt&) {
    ++runs;
    return grpc::Status::OK;
  });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("no authenticated tenant"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(runs, 0);
}

TEST_F(GrpcWrapper, AHandlerMayTakeTheClaimsContext) {
  Call c(keyed("k"));
  idem::Fence fence = 0;
  EXPECT_TRUE(rpc.unary(c.context, request, c.receipt,
                        [&](v1::Receipt&, idem::Context& context) {
                          fence = context.fence();
                          return grpc::Status::OK;
                        })
                  .ok());
  EXPECT_GT(fence, 0U);
}

TEST_F(GrpcWrapper, AStoredReplyThatIsNeitherAResponseNorAStatusIsDataLoss) {
  // The same key, payload and scope, recorded by a plain guard with bytes of its own.
  auto attempt = guard.begin<std::string>(idem::Key{"k", "tenant-1"},
                                          idem::protobuf::deterministic_bytes(request));
  ASSERT_TRUE(attempt.acquired());
  ASSERT_TRUE(attempt.commit(std::string("Xnot a reply")).recorded());
  MemoryRpc tenants{guard,
                    idem::GrpcOptions{.principal = idem::principal_from_metadata("x-tenant")}};
  Call c(keyed("k"));
  const grpc::Status s = tenants.unary(c.context, request, c.receipt, [&](v1::Receipt&) {
    ++runs;
    return grpc::Status::OK;
  });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_NE(s.error_message().find("payments.v1.Receipt"), std::string::npos) << s.error_message();
  EXPECT_EQ(runs, 0);
}

// ---- End to end, both APIs ---------------------------------------------------------------------

class GrpcEndToEnd : public ::testing::TestWithParam<Api> {};

TEST_P(GrpcEndToEnd, ARepeatReplaysTheSameBytesWithTheMarker) {
  InProcessServer server(GetParam());
  auto stub = stub_for(server.port());
  const v1::ChargeRequest request = request_of(1999);
  const Answer first = charge(*stub, request, keyed("order-1"));
  const Answer again = charge(*stub, request, keyed("order-1"));
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_FALSE(first.replayed);
  EXPECT_TRUE(again.replayed);
  EXPECT_FALSE(first.receipt.payment_id().empty());
  EXPECT_EQ(again.bytes(), first.bytes());
  EXPECT_EQ(server.charges(), 1);
}

TEST_P(GrpcEndToEnd, TheSameKeyWithAnotherRequestIsRefusedAndRunsNothing) {
  InProcessServer server(GetParam());
  auto stub = stub_for(server.port());
  ASSERT_TRUE(charge(*stub, request_of(1999), keyed("order-2")).status.ok());
  const Answer other = charge(*stub, request_of(2500), keyed("order-2"));
  EXPECT_EQ(other.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(other.status.error_message().find("another payload"), std::string::npos)
      << other.status.error_message();
  EXPECT_FALSE(other.replayed);
  EXPECT_EQ(server.charges(), 1);
}

TEST_P(GrpcEndToEnd, TheSameKeyFromAnotherTenantIsAnotherCharge) {
  InProcessServer server(GetParam());
  auto stub = stub_for(server.port());
  const Answer a = charge(*stub, request_of(1999), keyed("order-3", "tenant-a"));
  const Answer b = charge(*stub, request_of(1999), keyed("order-3", "tenant-b"));
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  EXPECT_FALSE(b.replayed);
  EXPECT_NE(a.receipt.payment_id(), b.receipt.payment_id());
  EXPECT_EQ(server.charges(), 2);
}

// Tenants apart through the gRPC face (the principal is the x-tenant entry): tenants whose
// names collide (a prefix of another, a separator, none at all) send the same key with requests
// of their own, one of them while another's charge is in flight. Each is charged once: no
// replay of another's receipt, no FAILED_PRECONDITION for another's request, no ABORTED for
// another's charge in flight; the admin finds each tenant's record under its own principal, and
// a tenant with no charge under the key finds, releases and forgets nothing.
TEST_P(GrpcEndToEnd, TenantsWhoseNamesCollideNeverMeetTheirRecords) {
  InProcessServer server(GetParam(), std::chrono::milliseconds{300});
  auto stub = stub_for(server.port());
  struct Sent {
    Metadata metadata;
    std::string principal;  // what the record is kept under
    long long cents;
    std::string bytes{};  // the receipt's
  };
  std::vector<Sent> sent{
      {keyed("order-9", "tenant-a"), "tenant-a", 100},
      {keyed("order-9", "tenant-"), "tenant-", 200},
      {keyed("order-9", "tenant-ab"), "tenant-ab", 300},
      {keyed("order-9", "tenant-a:"), "tenant-a:", 400},
      {keyed("rder-9", "tenant-ao"), "tenant-ao", 500},
      {Metadata{{"idempotency-key", "order-9"}}, "", 600},  // no tenant: the principal ""
  };
  std::optional<Answer> first;
  std::thread holder([&] {
    auto own = stub_for(server.port());
    first = charge(*own, request_of(sent[0].cents), sent[0].metadata);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds{100});
  for (std::size_t i = 1; i < sent.size(); ++i) {
    const Answer a = charge(*stub, request_of(sent[i].cents), sent[i].metadata);
    ASSERT_TRUE(a.status.ok()) << sent[i].principal << ": " << a.status.error_message();
    EXPECT_FALSE(a.replayed) << sent[i].principal;
    EXPECT_EQ(a.receipt.amount_cents(), sent[i].cents) << sent[i].principal;
    sent[i].bytes = a.bytes();
  }
  holder.join();
  ASSERT_TRUE(first && first->status.ok()) << (first ? first->status.error_message() : "");
  sent[0].bytes = first->bytes();
  EXPECT_EQ(server.charges(), static_cast<std::int64_t>(sent.size()));
  for (const Sent& s : sent) {
    const Answer again = charge(*stub, request_of(s.cents), s.metadata);
    ASSERT_TRUE(again.status.ok()) << s.principal << ": " << again.status.error_message();
    EXPECT_TRUE(again.replayed) << s.principal;
    EXPECT_EQ(again.bytes(), s.bytes) << s.principal << " got another tenant's receipt";
  }
  // An empty x-tenant entry is no tenant: the record of the call without one.
  const Answer empty = charge(*stub, request_of(sent.back().cents), keyed("order-9", ""));
  ASSERT_TRUE(empty.status.ok()) << empty.status.error_message();
  EXPECT_TRUE(empty.replayed);
  EXPECT_EQ(empty.bytes(), sent.back().bytes);
  EXPECT_EQ(server.charges(), static_cast<std::int64_t>(sent.size()));

  idem::admin::MemoryAdmin memory_admin{server.store().inner()};
  idem::admin::Admin& admin = memory_admin;
  for (const Sent& s : sent) {
    const auto key = s.principal == "tenant-ao" ? idem::Key{"rder-9", s.principal}
                                                : idem::Key{"order-9", s.principal};
    const auto seen = admin.inspect("payments.charge", key);
    ASSERT_TRUE(seen) << seen.failure().describe();
    ASSERT_TRUE(seen.value()) << s.principal;
    EXPECT_EQ(seen.value()->principal, s.principal);
  }
  const idem::Key stranger{"order-9", "tenant"};
  const auto none = admin.inspect("payments.charge", stranger);
  ASSERT_TRUE(none) << none.failure().describe();
  EXPECT_FALSE(none.value());
  const auto released = admin.release("payments.charge", stranger);
  ASSERT_TRUE(released);
  EXPECT_FALSE(released->changed);
  const auto forgotten = admin.forget("payments.charge", stranger);
  ASSERT_TRUE(forgotten);
  EXPECT_FALSE(forgotten->changed);
  // Forgetting one tenant's record: that tenant is charged again, the others still replay.
  ASSERT_TRUE(admin.forget("payments.charge", idem::Key{"order-9", "tenant-a"}));
  const Answer recharged = charge(*stub, request_of(sent[0].cents), sent[0].metadata);
  ASSERT_TRUE(recharged.status.ok()) << recharged.status.error_message();
  EXPECT_FALSE(recharged.replayed);
  for (std::size_t i = 1; i < sent.size(); ++i) {
    const Answer kept = charge(*stub, request_of(sent[i].cents), sent[i].metadata);
    ASSERT_TRUE(kept.status.ok()) << kept.status.error_message();
    EXPECT_EQ(kept.bytes(), sent[i].bytes) << sent[i].principal;
  }
  EXPECT_EQ(server.charges(), static_cast<std::int64_t>(sent.size()) + 1);
}

// A call with two x-tenant entries may carry the client's own beside the proxy's: neither is
// taken for the principal; the call is INVALID_ARGUMENT and charges nothing, in either order.
TEST_P(GrpcEndToEnd, TwoTenantEntriesAreInvalidArgumentAndChargeNothing) {
  InProcessServer server(GetParam());
  auto stub = stub_for(server.port());
  ASSERT_TRUE(charge(*stub, request_of(100), keyed("order-7", "tenant-a")).status.ok());
  for (const Metadata& twice :
       {Metadata{
            {"idempotency-key", "order-7"}, {"x-tenant", "tenant-a"}, {"x-tenant", "tenant-b"}},
        Metadata{
            {"idempotency-key", "order-7"}, {"x-tenant", "tenant-b"}, {"x-tenant", "tenant-a"}},
        Metadata{
            {"idempotency-key", "order-8"}, {"x-tenant", "tenant-a"}, {"x-tenant", "tenant-a"}}}) {
    const Answer refused = charge(*stub, request_of(100), twice);
    EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(refused.status.error_message().find("two 'x-tenant' entries"), std::string::npos)
        << refused.status.error_message();
    EXPECT_FALSE(refused.replayed);
  }
  EXPECT_EQ(server.charges(), 1);
}

TEST_P(GrpcEndToEnd, AnErrorStatusReplaysAsItself) {
  InProcessServer server(GetParam());
  auto stub = stub_for(server.port());
  const v1::ChargeRequest declined =
      request_of(1999, std::string(payments::Charger::kDeclinedCard));
  const Answer first = charge(*stub, declined, keyed("order-4"));
  const Answer again = charge(*stub, declined, keyed("order-4"));
  ASSERT_EQ(first.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(first.status.error_message(), "card declined");
  EXPECT_EQ(decline_reason(first.status.error_details()), "insufficient_funds");
  EXPECT_FALSE(first.replayed);
  EXPECT_EQ(again.status.error_code(), first.status.error_code());
  EXPECT_EQ(again.status.error_message(), first.status.error_message());
  EXPECT_EQ(again.status.error_details(), first.status.error_details());
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(server.charges(), 1);
}

TEST_P(GrpcEndToEnd, BadKeyMetadataIsInvalidArgumentAndRunsNothing) {
  InProcessServer server(GetParam());
  auto stub = stub_for(server.port());
  const v1::ChargeRequest request = request_of(1999);
  struct Case {
    const char* what;
    Metadata metadata;
    const char* says;
  };
  const std::vector<Case> cases{
      {"no key", {{"x-tenant", "t"}}, "missing 'idempotency-key'"},
      {"empty key", {{"idempotency-key", ""}}, "empty"},
      {"blank key", {{"idempotency-key", "   "}}, "blank"},
      {"key over the limit", {{"idempotency-key", std::string(257, 'k')}}, "257 bytes"},
      {"binary key", {{"idempotency-key-bin", "k-bin"}}, "binary metadata"},
      {"binary beside text", {{"idempotency-key", "k"}, {"idempotency-key-bin", "k"}}, "binary"},
      {"two keys", {{"idempotency-key", "k1"}, {"idempotency-key", "k2"}}, "exactly one"},
      {"the same key twice", {{"idempotency-key", "k1"}, {"idempotency-key", "k1"}}, "exactly one"},
  };
  for (const Case& c : cases) {
    const Answer a = charge(*stub, request, c.metadata);
    EXPECT_EQ(a.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.what;
    EXPECT_NE(a.status.error_message().find(c.says), std::string::npos)
        << c.what << ": " << a.status.error_message();
  }
  EXPECT_EQ(server.charges(), 0);
  // The longest key allowed runs.
  EXPECT_TRUE(charge(*stub, request, {{"idempotency-key", std::string(256, 'k')}}).status.ok());
  EXPECT_EQ(server.charges(), 1);
}

// Blanks around a key are not part of it (idem::key_text, as over HTTP): " k", "k " and "k" are
// one charge.
TEST_P(GrpcEndToEnd, KeysDifferingOnlyInSurroundingBlanksAreOneCharge) {
  InProcessServer server(GetParam());
  auto stub = stub_for(server.port());
  const v1::ChargeRequest request = request_of(2500);
  const Answer first = charge(*stub, request, keyed("k"));
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  for (const char* key : {" k", "k ", "  k  "}) {
    const Answer a = charge(*stub, request, keyed(key));
    ASSERT_TRUE(a.status.ok()) << key << ": " << a.status.error_message();
    EXPECT_TRUE(a.replayed) << key;
    EXPECT_EQ(a.bytes(), first.bytes()) << key;
  }
  EXPECT_EQ(server.charges(), 1);
}

// The retry hint of a duplicate is when the holder is likely done (the guard's recent charge
// durations), not the lease left (the call's 20 s deadline plus 5 s of grace): short for a fast
// charge, longer for a slow one, in milliseconds either way.
long long duplicate_retry_after(Api api, std::chrono::milliseconds charge_time, int warm_ups) {
  InProcessServer server(api, charge_time);
  auto stub = stub_for(server.port());
  for (int i = 0; i < warm_ups; ++i) {
    const Answer a = charge(*stub, request_of(100 + i), keyed("warm-" + std::to_string(i)));
    EXPECT_TRUE(a.status.ok()) << a.status.error_message();
  }
  const v1::ChargeRequest request = request_of(4200);
  std::thread holder([&] { EXPECT_TRUE(charge(*stub, request, keyed("dup")).status.ok()); });
  // The holder's charge has begun (so its claim is in) when the charger counts it.
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (server.charges() < warm_ups + 1 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  const Answer a = charge(*stub, request, keyed("dup"));
  holder.join();
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::ABORTED) << a.status.error_message();
  const long long retry_after = a.retry_after_ms.empty() ? -1 : std::stoll(a.retry_after_ms);
  EXPECT_EQ(retry_info_ms(a.status.error_details()), retry_after);
  EXPECT_EQ(server.charges(), warm_ups + 1);
  return retry_after;
}

TEST_P(GrpcEndToEnd, ADuplicateOfAFastChargeIsToldToRetrySoon) {
  const long long retry_after = duplicate_retry_after(GetParam(), 300ms, 3);
  EXPECT_GE(retry_after, 1);
  EXPECT_LE(retry_after, 2000) << "the lease left was 25 s; a charge takes 300 ms";
}

TEST_P(GrpcEndToEnd, ADuplicateOfASlowChargeIsToldToRetryLater) {
  const long long retry_after = duplicate_retry_after(GetParam(), 1500ms, 1);
  EXPECT_GE(retry_after, 1500) << "a charge takes 1.5 s";
  EXPECT_LE(retry_after, 5000) << "the lease left was 25 s; a charge takes 1.5 s";
}

// 32 client threads, 200 charges each, over keys picked at random so that most are repeated, often
// at the same time: each key is charged once and every answer for a key is the same receipt.
TEST_P(GrpcEndToEnd, ConcurrentRepeatsChargeEachKeyOnceAndAnswerAlike) {
  InProcessServer server(GetParam());
  auto stub = stub_for(server.port());
  constexpr int kThreads = 32;
  constexpr int kPerThread = 200;
  constexpr int kKeys = 800;
  std::mutex mutex;
  std::map<int, std::string> answers;  // the first receipt's bytes of each key
  std::atomic<int> differing{0}, failed{0}, replays{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<unsigned>(t) * 7919U + 1U);
      for (int i = 0; i < kPerThread; ++i) {
        const int k = static_cast<int>(random() % kKeys);
        const v1::ChargeRequest request = request_of(100 + k);
        Answer a;
        for (int tries = 0; tries < 2000; ++tries) {
          a = charge(*stub, request, keyed("key-" + std::to_string(k)));
          if (a.status.error_code() != grpc::StatusCode::ABORTED) break;
          std::this_thread::sleep_for(1ms);  // in progress: the holder finishes in well under
        }
        if (!a.status.ok()) {
          failed.fetch_add(1);
          continue;
        }
        if (a.replayed) replays.fetch_add(1);
        const std::lock_guard lock(mutex);
        auto [it, inserted] = answers.emplace(k, a.bytes());
        if (!inserted && it->second != a.bytes()) differing.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(differing.load(), 0);
  EXPECT_EQ(server.charges(), static_cast<std::int64_t>(answers.size()));
  EXPECT_EQ(replays.load(), kThreads * kPerThread - static_cast<int>(answers.size()));
}

// Under remember_failures the failure is remembered: INTERNAL, not retried, and replayed.
TEST(GrpcRemembered, AHandlerThatThrowsIsRememberedAndAnswersInternal) {
  idem::MemoryStore store;
  MemoryGuard guard{store, idem::Options{.scope = "remembered", .remember_failures = true}};
  MemoryRpc rpc{guard};
  const v1::ChargeRequest request = request_of(1999);
  int runs = 0;
  auto handler = [&](v1::Receipt&) -> grpc::Status {
    ++runs;
    throw std::runtime_error("card declined");
  };
  Call first(keyed("k"));
  const grpc::Status threw = rpc.unary(first.context, request, first.receipt, handler);
  EXPECT_EQ(threw.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_FALSE(idem::grpc_retryable(threw.error_code()));
  Call again(keyed("k"));
  const grpc::Status replay = rpc.unary(again.context, request, again.receipt, handler);
  EXPECT_EQ(replay.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(runs, 1);
}

// A call with a deadline claims for the deadline's time in its claim: a fresh call is one claim
// and one commit, no extend, and the claim asked for the deadline plus the grace.
TEST_P(GrpcEndToEnd, ACallWithADeadlineClaimsForItWithoutAnExtend) {
  InProcessServer server(GetParam());
  auto stub = stub_for(server.port());
  const Answer a = charge(*stub, request_of(700), keyed("deadline"), 2000ms);
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_EQ(server.store().claims.load(), 1);
  EXPECT_EQ(server.store().commits.load(), 1);
  EXPECT_EQ(server.store().extends.load(), 0);
  const auto lease = server.store().last_claim_lease_ms.load();
  EXPECT_GT(lease, 5000);  // the deadline left (under 2 s) plus the 5 s grace
  // gRPC sends the time left as a timeout computed from its cached clock, which a loaded machine
  // lets lag by a few milliseconds: the server may see a little more than 2 s left.
  EXPECT_LE(lease, 7250);
}

// A charge slower than the client's deadline: the client gives up, retries with the same key, is
// told the charge is in progress (with the holder's lease, taken from the call's deadline, as
// retry-after-ms), and finally gets the receipt replayed. The card is charged once.
TEST_P(GrpcEndToEnd, AChargeSlowerThanTheDeadlineRetriedRunsOnce) {
  InProcessServer server(GetParam(), 1500ms);
  auto stub = stub_for(server.port());
  const v1::ChargeRequest request = request_of(4200);
  const Answer first = charge(*stub, request, keyed("slow"), 300ms);
  EXPECT_EQ(first.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  Answer a;
  long long retry_after = -1;
  for (int tries = 0; tries < 100; ++tries) {
    a = charge(*stub, request, keyed("slow"), 300ms);
    if (a.status.error_code() == grpc::StatusCode::ABORTED && !a.retry_after_ms.empty()) {
      retry_after = std::stoll(a.retry_after_ms);
      // The same delay as gRPC's rich error model has it: a RetryInfo detail.
      EXPECT_EQ(retry_info_ms(a.status.error_details()), retry_after);
    }
    if (a.status.ok()) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_TRUE(a.replayed);
  EXPECT_EQ(server.charges(), 1);
  // The holder's lease is the 300 ms deadline plus the 5 s grace, not the guard's 30 s (and not
  // so short that a retry takes over a charge still running: 1.2 s did).
  EXPECT_GT(retry_after, 0);
  EXPECT_LE(retry_after, 5300);
}

INSTANTIATE_TEST_SUITE_P(Api, GrpcEndToEnd, ::testing::Values(Api::sync, Api::callback),
                         [](const auto& info) {
                           return std::string(info.param == Api::sync ? "Sync" : "Callback");
                         });

// ---- The example's server, killed and restarted -------------------------------------------------

// Clients charge new keys while the server is SIGKILLed; restarted on the same SQLite file, it
// replays every charge a client got an answer for, byte for byte.
TEST(GrpcPaymentsServer, SigkilledAndRestartedOnItsDatabaseLosesNoCompletedCall) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("idem-grpc-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "payments.db").string();

  std::mutex mutex;
  std::map<long long, std::string> completed;  // amount (the key's number) -> receipt bytes
  {
    ChildServer server({"--db", db});
    auto stub = stub_for(server.port());
    std::atomic<bool> killed{false};
    std::vector<std::thread> clients;
    for (int t = 0; t < 8; ++t) {
      clients.emplace_back([&, t] {
        for (long long i = 0;; ++i) {
          const long long n = 1 + t * 1000000LL + i;
          const Answer a = charge(*stub, request_of(n), keyed("kill-" + std::to_string(n)), 5s);
          if (!a.status.ok()) {
            if (killed.load()) return;
            continue;
          }
          const std::lock_guard lock(mutex);
          completed.emplace(n, a.bytes());
        }
      });
    }
    // Killed while the clients are busy: once they completed a few dozen calls (a loaded host
    // may take a while to start the server), a little later.
    const auto give_up = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      {
        const std::lock_guard lock(mutex);
        if (completed.size() >= 40) break;
      }
      if (std::chrono::steady_clock::now() > give_up) break;
      std::this_thread::sleep_for(10ms);
    }
    std::this_thread::sleep_for(30ms);
    killed.store(true);
    server.stop(SIGKILL);
    for (auto& client : clients) client.join();
  }
  ASSERT_GT(completed.size(), 8U);

  ChildServer restarted({"--db", db});
  auto stub = stub_for(restarted.port());
  int lost = 0;
  for (const auto& [n, bytes] : completed) {
    const Answer a = charge(*stub, request_of(n), keyed("kill-" + std::to_string(n)));
    if (!a.status.ok() || !a.replayed || a.bytes() != bytes) ++lost;
  }
  EXPECT_EQ(lost, 0) << "of " << completed.size() << " completed calls";
  restarted.stop(SIGTERM);
  std::filesystem::remove_all(dir);
}

}  // namespace
