// RedisStore: the record scripts (record_*.lua) behind the idem::Store calls.

#include <fmt/format.h>

#include "idem/redis/store.hpp"
#include "lua_scripts.hpp"
#include "store_common.hpp"

namespace idem {

RedisStore::RedisStore(std::shared_ptr<redis::Client> client, RedisStoreOptions options)
    : client_(std::move(client)), options_(std::move(options)) {
  if (!client_) client_ = std::make_shared<redis::Client>();
}

std::string RedisStore::record_key(std::string_view effective_key) const {
  return redis::tagged_key(options_.prefix, effective_key);
}

Result<Claim> RedisStore::claim(const ClaimRequest& request) {
  return redis::eval_claim(impl_of(*client_), redis::script_record_claim, record_key(request.key),
                           request, redis::record_codes,
                           {options_.durability, replication_timeouts_});
}

Status RedisStore::commit(const Ticket& ticket, const Completion& completion) {
  return redis::eval_record_commit(impl_of(*client_), redis::script_record_commit,
                                   record_key(ticket.key), ticket.fence, completion,
                                   {options_.durability, replication_timeouts_});
}

Status RedisStore::abort(const Ticket& ticket) {
  return redis::eval_record_abort(impl_of(*client_), redis::script_record_abort,
                                  record_key(ticket.key), ticket.fence);
}

void RedisStore::await_change(const Ticket& held, std::chrono::milliseconds bound) {
  redis::await_change(impl_of(*client_), record_key(held.key), held.fence, bound);
}

Status RedisStore::extend(const Ticket& ticket, std::chrono::milliseconds lease) {
  return redis::eval_record_extend(impl_of(*client_), redis::script_record_extend,
                                   record_key(ticket.key), ticket.fence, lease);
}

}  // namespace idem
