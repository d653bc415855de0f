// StoreStats' open part: a backend's own figures (StatParts), typed and through a StatSink.

#include "idem/store_stats.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace idem {
namespace {

// A backend's part as an adapter would write one: the core knows nothing of it.
struct TapeStats {
  std::uint64_t rewinds = 0;
  PoolStats drive{};
  void report(StatSink& sink) const {
    sink.figure({.family = "store_tape_events_total",
                 .help = "tape events",
                 .label = "event",
                 .label_value = "rewind",
                 .value = rewinds});
    sink.pool("drive", drive);
  }
};

struct GaugeStats {
  std::uint64_t spinning = 0;
  void report(StatSink& sink) const {
    sink.figure({.family = "store_spinning", .help = "now", .counter = false, .value = spinning});
  }
};

struct Recorder final : StatSink {
  std::vector<std::string> lines;
  void figure(const StatFigure& f) override {
    lines.push_back(std::string(f.family) + (f.counter ? " counter " : " gauge ") +
                    std::string(f.label) + "=" + std::string(f.label_value) + " " +
                    std::to_string(f.value));
  }
  void pool(std::string_view name, const PoolStats& pool) override {
    lines.push_back("pool " + std::string(name) + " " + std::to_string(pool.opened));
  }
};

TEST(StatPartsTest, APartIsReadByItsTypeAndReplacedBySettingItAgain) {
  StoreStats stats{.store = "tape"};
  EXPECT_TRUE(stats.parts.empty());
  EXPECT_EQ(stats.parts.get<TapeStats>(), nullptr);
  stats.parts.set(TapeStats{.rewinds = 2});
  stats.parts.set(GaugeStats{.spinning = 1});
  ASSERT_NE(stats.parts.get<TapeStats>(), nullptr);
  EXPECT_EQ(stats.parts.get<TapeStats>()->rewinds, 2u);
  stats.parts.set(TapeStats{.rewinds = 5});  // one part per type
  EXPECT_EQ(stats.parts.get<TapeStats>()->rewinds, 5u);
  stats.parts.get<GaugeStats>()->spinning = 3;  // a store adds its own figure to its client's
  const StoreStats copy = stats;                // a copy has its own parts
  stats.parts.get<GaugeStats>()->spinning = 4;
  EXPECT_EQ(copy.parts.get<GaugeStats>()->spinning, 3u);
}

TEST(StatPartsTest, EveryPartReportsToTheSinkInTheOrderItWasSet) {
  StoreStats stats;
  stats.parts.set(TapeStats{.rewinds = 7, .drive = PoolStats{.opened = 3}});
  stats.parts.set(GaugeStats{.spinning = 1});
  Recorder sink;
  stats.parts.report(sink);
  EXPECT_EQ(sink.lines, (std::vector<std::string>{"store_tape_events_total counter event=rewind 7",
                                                  "pool drive 3", "store_spinning gauge = 1"}));
}

}  // namespace
}  // namespace idem
