// TransitionTable: validation at construction and the Mermaid diagram.

#include "idem/transition_table.hpp"

#include <gtest/gtest.h>

#include <string>

#include "support/order_machine.hpp"

namespace idem {
namespace {

TransitionTable orders() { return testing::order_machine(); }

// The message of the std::invalid_argument that building the table throws, or "" if none.
template <class Build>
std::string refusal(Build&& build) {
  try {
    (void)build();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(TransitionTableTest, FindsTransitionsAndTellsWhatIsAllowed) {
  const TransitionTable t = orders();
  ASSERT_NE(t.find("SHIP"), nullptr);
  EXPECT_EQ(t.find("SHIP")->to, "SHIPPED");
  EXPECT_EQ(t.find("FLY"), nullptr);
  EXPECT_TRUE(t.allows("PAY", "CREATED"));
  EXPECT_FALSE(t.allows("SHIP", "CREATED"));
  EXPECT_FALSE(t.allows("FLY", "CREATED"));
  EXPECT_EQ(t.initial(), "CREATED");
}

TEST(TransitionTableTest, UnknownStatesDuplicateEventsAndUnreachableStatesAreRefused) {
  const std::string unknown_to = refusal([] {
    return TransitionTable{"A", {"A", "B"}, {{"GO", {"A"}, "C"}}};
  });
  EXPECT_NE(unknown_to.find("unknown state 'C'"), std::string::npos) << unknown_to;
  const std::string unknown_from = refusal([] {
    return TransitionTable{"A", {"A", "B"}, {{"GO", {"X"}, "B"}}};
  });
  EXPECT_NE(unknown_from.find("unknown state 'X'"), std::string::npos) << unknown_from;
  const std::string unknown_initial = refusal([] { return TransitionTable{"Z", {"A"}, {}}; });
  EXPECT_NE(unknown_initial.find("'Z'"), std::string::npos) << unknown_initial;
  const std::string duplicate = refusal([] {
    return TransitionTable{"A", {"A", "B"}, {{"GO", {"A"}, "B"}, {"GO", {"B"}, "A"}}};
  });
  EXPECT_NE(duplicate.find("event 'GO' is declared twice"), std::string::npos) << duplicate;
  const std::string unreachable = refusal([] {
    return TransitionTable{"A", {"A", "B", "C"}, {{"GO", {"A"}, "B"}, {"BACK", {"C"}, "A"}}};
  });
  EXPECT_NE(unreachable.find("state 'C' is unreachable"), std::string::npos) << unreachable;
  const std::string twice = refusal([] { return TransitionTable{"A", {"A", "A"}, {}}; });
  EXPECT_NE(twice.find("declared twice"), std::string::npos) << twice;
  const std::string no_from = refusal([] {
    return TransitionTable{"A", {"A", "B"}, {{"GO", {}, "B"}}};
  });
  EXPECT_NE(no_from.find("no from-state"), std::string::npos) << no_from;
  EXPECT_EQ(refusal(orders), "");
}

TEST(TransitionTableTest, PrintsAsAMermaidStateDiagram) {
  EXPECT_EQ(orders().mermaid(),
            "stateDiagram-v2\n"
            "    [*] --> CREATED\n"
            "    CREATED --> PAID : PAY\n"
            "    PAID --> SHIPPED : SHIP\n"
            "    SHIPPED --> COMPLETED : COMPLETE\n"
            "    PAID --> REFUNDING : REFUND\n"
            "    REFUNDING --> REFUNDED : REFUNDED\n"
            "    COMPLETED --> [*]\n"
            "    REFUNDED --> [*]\n");
}

enum class Light { red, green, yellow };
const char* light_name(Light l) {
  switch (l) {
    case Light::red:
      return "RED";
    case Light::green:
      return "GREEN";
    case Light::yellow:
      return "YELLOW";
  }
  return "?";
}

TEST(TransitionTableTest, EnumStatesGoThroughTheirNames) {
  const TransitionTable t =
      TransitionTable::of(Light::red, {Light::red, Light::green, Light::yellow}, light_name,
                          {{"GO", {Light::red}, Light::green},
                           {"SLOW", {Light::green}, Light::yellow},
                           {"STOP", {Light::yellow, Light::green}, Light::red}});
  EXPECT_TRUE(t.allows("STOP", "GREEN"));
  EXPECT_EQ(t.find("GO")->to, "GREEN");
  EXPECT_NE(t.mermaid().find("YELLOW --> RED : STOP"), std::string::npos) << t.mermaid();
}

}  // namespace
}  // namespace idem
