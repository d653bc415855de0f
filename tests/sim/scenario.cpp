#include "sim/scenario.hpp"

#include <charconv>
#include <cstdio>

#include "sim/rng.hpp"

namespace idem::sim {

std::size_t Scenario::size() const {
  std::size_t n = 0;
  for (const ProcessPlan& p : processes) {
    for (const ActorPlan& a : p.actors) n += a.ops.size();
  }
  return n;
}

namespace {

int chance_rate(Rng& rng, std::initializer_list<int> rates) {
  return rng.chance(500) ? 0 : rng.pick(rates);
}

HandlerPlan make_plan(Rng& rng, const Scenario& s, bool steps_allowed) {
  HandlerPlan h;
  if (steps_allowed && rng.chance(350)) h.steps = static_cast<int>(rng.between(1, 3));
  if (h.steps > 0 && rng.chance(150)) {
    h.fail_step = static_cast<int>(rng.below(static_cast<std::uint64_t>(h.steps)));
    h.catch_step = rng.chance(500);
  }
  if (rng.chance(400)) {
    h.work_ms = rng.pick({1, 5, s.lease_ms / 2, s.lease_ms, s.lease_ms + 1, 2 * s.lease_ms});
  }
  h.extend = rng.chance(200);
  h.ledger = rng.chance(500);
  h.throws = rng.chance(120);
  h.big = rng.chance(30);
  return h;
}

Item make_item(Rng& rng, const Scenario& s) {
  return Item{static_cast<int>(rng.below(static_cast<std::uint64_t>(s.keys))),
              static_cast<int>(rng.below(static_cast<std::uint64_t>(s.payloads)))};
}

Op make_op(Rng& rng, const Scenario& s, const ProcessPlan& p) {
  const bool lease = s.mode == StoreMode::lease;
  Op op;
  const std::uint64_t roll = rng.below(100);
  if (roll < 38) {
    op.kind = OpKind::execute;
  } else if (roll < 53) {
    op.kind = OpKind::commit;
  } else if (roll < 61) {
    op.kind = OpKind::fail;
  } else if (roll < 67) {
    op.kind = OpKind::drop;
  } else if (roll < 77) {
    op.kind = lease ? OpKind::batch : OpKind::execute;
  } else if (roll < 82) {
    op.kind = lease ? OpKind::release : OpKind::execute;
  } else if (roll < 87) {
    op.kind = lease ? OpKind::forget : OpKind::execute;
  } else if (roll < 91) {
    op.kind = lease ? OpKind::purge : OpKind::execute;
  } else if (roll < 94) {
    op.kind = lease && s.keep_request && !p.group ? OpKind::completer : OpKind::execute;
  } else {
    op.kind = lease ? OpKind::layered : OpKind::execute;
    op.request = static_cast<int>(rng.below(2));
  }
  op.items.push_back(make_item(rng, s));
  if (op.kind == OpKind::batch) {
    const auto n = rng.between(1, 3);
    for (int i = 0; i < n; ++i) op.items.push_back(make_item(rng, s));
  }
  op.handler = make_plan(rng, s, !p.group);
  if (rng.chance(500)) op.pause_ms = static_cast<int>(rng.between(1, 2 * s.lease_ms));
  return op;
}

}  // namespace

Scenario generate(std::uint64_t seed) {
  Rng rng(seed, /*stream=*/2);
  Scenario s;
  s.seed = seed;
  s.mode = rng.chance(200) ? StoreMode::transactional : StoreMode::lease;
  const bool lease = s.mode == StoreMode::lease;
  s.lease_ms = rng.pick({20, 40, 60});
  s.ttl_ms = rng.pick({s.lease_ms / 2, s.lease_ms, s.lease_ms + 1, 2 * s.lease_ms, 6 * s.lease_ms});
  s.remember_failures = rng.chance(400);
  s.wait_ms = rng.chance(400) ? rng.pick({10, 50, 150}) : 0;
  s.commit_tries = static_cast<int>(rng.between(1, 3));
  s.keep_request = lease && rng.chance(300);
  s.keys = static_cast<int>(rng.between(1, 3));
  s.payloads = rng.chance(300) ? 2 : 1;
  s.faults.lose_request = chance_rate(rng, {5, 20, 60});
  s.faults.lose_reply = chance_rate(rng, {5, 20, 60});
  s.faults.delay_reply = chance_rate(rng, {5, 20});
  s.faults.duplicate = chance_rate(rng, {5, 20});
  s.faults.latency = chance_rate(rng, {100, 300});
  s.faults.long_delay = std::chrono::milliseconds(s.lease_ms + rng.between(1, s.lease_ms));
  s.crash_rate = chance_rate(rng, {2, 5});
  s.restart_rate = chance_rate(rng, {1, 3});
  s.jump_rate = chance_rate(rng, {2, 5, 10});
  s.drop_rate = lease ? 0 : chance_rate(rng, {2, 5});
  s.max_events = static_cast<int>(rng.between(1, 4));
  s.volatile_store = lease && rng.chance(50);
  const int processes = s.volatile_store ? 1 : static_cast<int>(rng.between(1, 3));
  int actors_left = 5;
  for (int i = 0; i < processes && actors_left > 0; ++i) {
    ProcessPlan p;
    if (lease) {
      const std::uint64_t front = rng.below(100);
      p.cache = front < 25;
      p.group = front >= 25 && front < 45 && !s.keep_request;
      p.group_in_flight = p.group && front >= 35 ? 2 : 1;  // no draw: seeds keep their runs
    }
    const int actors =
        std::min(actors_left, static_cast<int>(rng.between(1, i == 0 && processes == 1 ? 4 : 2)));
    actors_left -= actors;
    for (int a = 0; a < actors; ++a) {
      ActorPlan actor;
      const auto ops = rng.between(1, 4);
      for (int o = 0; o < ops; ++o) actor.ops.push_back(make_op(rng, s, p));
      p.actors.push_back(std::move(actor));
    }
    s.processes.push_back(std::move(p));
  }
  return s;
}

// --- Text --------------------------------------------------------------------------------------

namespace {

void put(std::string& out, const char* name, long long value) {
  out += ' ';
  out += name;
  out += '=';
  out += std::to_string(value);
}

std::string plan_text(const HandlerPlan& h) {
  std::string out;
  if (h.steps > 0) out += "s" + std::to_string(h.steps);
  if (h.fail_step >= 0) out += "x" + std::to_string(h.fail_step);
  if (h.catch_step) out += "k";
  if (h.work_ms > 0) out += "w" + std::to_string(h.work_ms);
  if (h.extend) out += "e";
  if (h.ledger) out += "l";
  if (h.throws) out += "t";
  if (h.big) out += "B";
  return out;
}

}  // namespace

std::string to_text(const Scenario& s) {
  std::string out = "seed=" + std::to_string(s.seed);
  out += s.mode == StoreMode::transactional ? " mode=tx" : " mode=lease";
  put(out, "vol", s.volatile_store);
  put(out, "lease", s.lease_ms);
  put(out, "ttl", s.ttl_ms);
  put(out, "rf", s.remember_failures);
  put(out, "wait", s.wait_ms);
  put(out, "tries", s.commit_tries);
  put(out, "keep", s.keep_request);
  put(out, "keys", s.keys);
  put(out, "pays", s.payloads);
  put(out, "lq", s.faults.lose_request);
  put(out, "lr", s.faults.lose_reply);
  put(out, "dr", s.faults.delay_reply);
  put(out, "du", s.faults.duplicate);
  put(out, "la", s.faults.latency);
  put(out, "ld",
      std::chrono::duration_cast<std::chrono::milliseconds>(s.faults.long_delay).count());
  put(out, "crash", s.crash_rate);
  put(out, "restart", s.restart_rate);
  put(out, "jump", s.jump_rate);
  put(out, "drop", s.drop_rate);
  put(out, "events", s.max_events);
  for (const ProcessPlan& p : s.processes) {
    out += " | p";
    if (p.cache) out += 'c';
    if (p.group) out += p.group_in_flight == 2 ? "g2" : "g";
    for (const ActorPlan& a : p.actors) {
      out += " :";
      for (std::size_t i = 0; i < a.ops.size(); ++i) {
        const Op& op = a.ops[i];
        out += i == 0 ? " " : ",";
        out += static_cast<char>(op.kind);
        for (std::size_t j = 0; j < op.items.size(); ++j) {
          if (j > 0) out += '+';
          out += std::to_string(op.items[j].key) + "." + std::to_string(op.items[j].payload);
        }
        if (op.kind == OpKind::layered) out += "#" + std::to_string(op.request);
        if (op.pause_ms > 0) out += "@" + std::to_string(op.pause_ms);
        const std::string plan = plan_text(op.handler);
        if (!plan.empty()) out += "{" + plan + "}";
      }
    }
  }
  return out;
}

namespace {

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}
  bool done() {
    skip_spaces();
    return pos_ >= text_.size();
  }
  void skip_spaces() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  bool peek(char c) {
    skip_spaces();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  bool eat_exact(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::optional<std::uint64_t> unsigned_number() {
    std::uint64_t v = 0;
    const char* begin = text_.data() + pos_;
    const auto [end, ec] = std::from_chars(begin, text_.data() + text_.size(), v);
    if (ec != std::errc{} || end == begin) return std::nullopt;
    pos_ += static_cast<std::size_t>(end - begin);
    return v;
  }
  std::optional<long long> number() {
    long long v = 0;
    const char* begin = text_.data() + pos_;
    const auto [end, ec] = std::from_chars(begin, text_.data() + text_.size(), v);
    if (ec != std::errc{} || end == begin) return std::nullopt;
    pos_ += static_cast<std::size_t>(end - begin);
    return v;
  }
  std::string_view word() {
    skip_spaces();
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != '=' && text_[pos_] != ' ' && text_[pos_] != '|') {
      ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }
  char next() { return pos_ < text_.size() ? text_[pos_++] : '\0'; }
  char look() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

bool read_plan(Reader& r, HandlerPlan& h) {
  while (!r.eat_exact('}')) {
    const char c = r.next();
    auto num = [&](int& into) {
      const auto v = r.number();
      if (!v) return false;
      into = static_cast<int>(*v);
      return true;
    };
    switch (c) {
      case 's':
        if (!num(h.steps)) return false;
        break;
      case 'x':
        if (!num(h.fail_step)) return false;
        break;
      case 'k':
        h.catch_step = true;
        break;
      case 'w':
        if (!num(h.work_ms)) return false;
        break;
      case 'e':
        h.extend = true;
        break;
      case 'l':
        h.ledger = true;
        break;
      case 't':
        h.throws = true;
        break;
      case 'B':
        h.big = true;
        break;
      default:
        return false;
    }
  }
  return true;
}

bool read_op(Reader& r, Op& op) {
  const char kind = r.next();
  switch (kind) {
    case 'e':
    case 'c':
    case 'f':
    case 'd':
    case 'b':
    case 'R':
    case 'F':
    case 'P':
    case 'C':
    case 'L':
      op.kind = static_cast<OpKind>(kind);
      break;
    default:
      return false;
  }
  do {
    const auto key = r.number();
    if (!key || !r.eat_exact('.')) return false;
    const auto payload = r.number();
    if (!payload) return false;
    op.items.push_back(Item{static_cast<int>(*key), static_cast<int>(*payload)});
  } while (r.eat_exact('+'));
  if (r.eat_exact('#')) {
    const auto request = r.number();
    if (!request) return false;
    op.request = static_cast<int>(*request);
  }
  if (r.eat_exact('@')) {
    const auto pause = r.number();
    if (!pause) return false;
    op.pause_ms = static_cast<int>(*pause);
  }
  if (r.eat_exact('{') && !read_plan(r, op.handler)) return false;
  return true;
}

}  // namespace

std::optional<Scenario> parse(std::string_view text, std::string& error) {
  Scenario s;
  Reader r(text);
  while (!r.done() && !r.peek('|')) {
    const std::string_view name = r.word();
    if (!r.eat_exact('=')) {
      error = "expected name=value at '" + std::string(name) + "'";
      return std::nullopt;
    }
    if (name == "mode") {
      const std::string_view v = r.word();
      if (v != "lease" && v != "tx") {
        error = "mode is lease or tx";
        return std::nullopt;
      }
      s.mode = v == "tx" ? StoreMode::transactional : StoreMode::lease;
      continue;
    }
    if (name == "seed") {  // any 64-bit seed, as the shrinker prints it
      const auto seed = r.unsigned_number();
      if (!seed) {
        error = "expected a number from 0 to 2^64-1 after seed=";
        return std::nullopt;
      }
      s.seed = *seed;
      continue;
    }
    const auto v = r.number();
    if (!v) {
      error = "expected a number after " + std::string(name) + "=";
      return std::nullopt;
    }
    const auto i = static_cast<int>(*v);
    if (name == "vol") {
      s.volatile_store = i != 0;
    } else if (name == "lease") {
      s.lease_ms = i;
    } else if (name == "ttl") {
      s.ttl_ms = i;
    } else if (name == "rf") {
      s.remember_failures = i != 0;
    } else if (name == "wait") {
      s.wait_ms = i;
    } else if (name == "tries") {
      s.commit_tries = i;
    } else if (name == "keep") {
      s.keep_request = i != 0;
    } else if (name == "keys") {
      s.keys = i;
    } else if (name == "pays") {
      s.payloads = i;
    } else if (name == "lq") {
      s.faults.lose_request = i;
    } else if (name == "lr") {
      s.faults.lose_reply = i;
    } else if (name == "dr") {
      s.faults.delay_reply = i;
    } else if (name == "du") {
      s.faults.duplicate = i;
    } else if (name == "la") {
      s.faults.latency = i;
    } else if (name == "ld") {
      s.faults.long_delay = std::chrono::milliseconds(i);
    } else if (name == "crash") {
      s.crash_rate = i;
    } else if (name == "restart") {
      s.restart_rate = i;
    } else if (name == "jump") {
      s.jump_rate = i;
    } else if (name == "drop") {
      s.drop_rate = i;
    } else if (name == "events") {
      s.max_events = i;
    } else {
      error = "unknown setting " + std::string(name);
      return std::nullopt;
    }
  }
  while (r.eat('|')) {
    if (!r.eat('p')) {
      error = "a process starts with p";
      return std::nullopt;
    }
    ProcessPlan p;
    for (;;) {
      if (r.eat_exact('c')) {
        p.cache = true;
      } else if (r.eat_exact('g')) {
        p.group = true;
        if (r.eat_exact('2')) p.group_in_flight = 2;
      } else {
        break;
      }
    }
    while (r.eat(':')) {
      ActorPlan a;
      r.skip_spaces();
      do {
        Op op;
        if (!read_op(r, op)) {
          error = "cannot read an operation";
          return std::nullopt;
        }
        a.ops.push_back(std::move(op));
      } while (r.eat_exact(','));
      p.actors.push_back(std::move(a));
    }
    s.processes.push_back(std::move(p));
  }
  if (!r.done()) {
    error = "unexpected text after the processes";
    return std::nullopt;
  }
  if (s.keys < 1 || s.payloads < 1 || s.lease_ms < 1 || s.commit_tries < 1) {
    error = "keys, pays, lease and tries must be at least 1";
    return std::nullopt;
  }
  return s;
}

}  // namespace idem::sim
