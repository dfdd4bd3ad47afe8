// pgraph test double of simpler's `orchestration/pto_arg_with_deps.h`: CoreTaskArgs with an
// inline dependency list (docs/upstream.md §2.3). Generated pypto code does not use
// it; it is here so the header set matches the real one. No simpler code was copied.
#pragma once

#include "pto_orchestration_api.h"

template <int N = 16>
class CoreTaskArgsWithDeps : public CoreTaskArgs {
public:
    // A WAIT|RETAIN dependency (ordering and producer lifetime).
    void add_dep(PTO2TaskId id) { push(id, static_cast<DepFlags>(DEP_WAIT | DEP_RETAIN)); }
    // A WAIT-only dependency (ordering without holding the producer's buffers).
    void add_dep_wait(PTO2TaskId id) { push(id, DEP_WAIT); }

private:
    void push(PTO2TaskId id, DepFlags kind) {
        if (count_ >= static_cast<uint32_t>(N)) return set_error("CoreTaskArgsWithDeps: too many dependencies");
        deps_[count_] = id;
        kinds_[count_] = kind;
        ++count_;
        replace_dependencies(deps_, kinds_, count_);
    }
    PTO2TaskId deps_[N];
    DepFlags kinds_[N];
    uint32_t count_ = 0;
};
