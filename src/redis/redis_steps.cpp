// RedisStore's steps (idem::StepStore): record_step_save.lua and record_step_load.lua, each one
// script on the record's own hash.

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "idem/redis/store.hpp"
#include "lua_scripts.hpp"
#include "store_common.hpp"

namespace idem {

Result<std::vector<StepRecord>> RedisStore::load_steps(const Ticket& ticket) {
  constexpr std::string_view doing = "load_steps";
  redis::DecimalText fence;
  const std::array<std::string_view, 1> args{
      redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence))};
  Result<redis::Answer> answer =
      impl_of(*client_).eval(redis::script_record_step_load, record_key(ticket.key), args);
  if (!answer) return std::move(answer).failure();
  const redisReply& r = *answer->reply;
  if (r.type != REDIS_REPLY_ARRAY || r.elements < 1 || r.elements % 2 != 1) {
    return redis::unexpected_reply(answer->where, doing);
  }
  // {done or lease_lost, name, result, ...}: the code is a fenced script's.
  if (Status fenced = redis::decode_fenced(*r.element[0], answer->where, doing); !fenced) {
    return fenced.failure();
  }
  std::vector<StepRecord> steps;
  steps.reserve(r.elements / 2);
  for (std::size_t i = 1; i + 1 < r.elements; i += 2) {
    const redisReply* name = r.element[i];
    const redisReply* result = r.element[i + 1];
    if (name->type != REDIS_REPLY_STRING || result->type != REDIS_REPLY_STRING) {
      return redis::unexpected_reply(answer->where, doing);
    }
    steps.push_back(
        StepRecord{std::string(name->str, name->len), std::string(result->str, result->len)});
  }
  return steps;
}

Status RedisStore::save_step(const Ticket& ticket, const StepWrite& step) {
  constexpr std::string_view doing = "save_step";
  redis::DecimalText fence;
  redis::DecimalText index;
  const std::array<std::string_view, 4> args{
      redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)),
      redis::to_chars(index, static_cast<std::int64_t>(step.index)), step.name, step.result};
  Result<redis::Answer> answer =
      impl_of(*client_).eval(redis::script_record_step_save, record_key(ticket.key), args);
  if (!answer) return std::move(answer).failure();
  const redisReply& r = *answer->reply;
  if (r.type == REDIS_REPLY_INTEGER && r.integer == redis::kStepReplyGap) {
    return Status(errc::step_mismatch,
                  "step " + std::to_string(step.index) + " saved before the steps ahead of it");
  }
  return redis::decode_fenced(r, answer->where, doing);
}

}  // namespace idem
