#pragma once
// Mutation points for the deterministic simulator (docs/simulation.md): IDEM_SIM_MUTATE(n) puts a
// known defect back under the simulator; in every other build it is the constant false.

#if defined(IDEM_SIM_MUTANTS)
namespace idem::detail {
inline int sim_mutant = 0;  ///< the defect the simulator runs with (0: none)
}  // namespace idem::detail
#define IDEM_SIM_MUTATE(n) (::idem::detail::sim_mutant == (n))
#else
#define IDEM_SIM_MUTATE(n) false
#endif
