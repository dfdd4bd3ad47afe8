// pgraph recording runtime: implements tests/cpp/pto_orchestration_api.h by recording every
// submit instead of running it. It models what decides the task graph in simpler's
// tensormap_and_ringbuffer runtime (docs/upstream.md §2.4,
// §3, §5.1, §5.3), independently of pgraph's Python planner:
//   - scopes: a stack with AUTO/MANUAL modes, the mode read from the runtime's pending scope
//     mode; depth 0 is the executor's root scope; ring = min(depth, 3); AUTO inside MANUAL is
//     fatal 5; at most 64 levels;
//   - task ids: per-ring local counters, raw = (ring << 32) | local; alloc tasks and dummies
//     take ids too; a scope holding window-1 (16383) tasks is fatal 1 (SCOPE_DEADLOCK);
//   - submit validation: Arg errors (tensor after scalar, second set_dependencies, null deps)
//     fatal 5; empty mask or block_num < 1 fatal 5; sync_start with block_num > 1 above the
//     cluster count (MIX/AIC, 24 on a2a3) or AIV count (48) fatal 7; a view or reshape outside
//     its source (or of a non-contiguous tensor) fatal 5 when it is made;
//   - explicit deps: an invalid or unknown id is fatal 5; otherwise a WAIT|RETAIN edge;
//   - OUTPUT arguments of a submit (add_output(TensorCreateInfo)): a buffer allocated at submit,
//     owned by the submitting task, returned by the submit (get_ref in argument order);
//   - AUTO scopes only (nothing in MANUAL), per tensor argument except OUTPUT:
//     A. creator edge to owner_task_id when valid; B. for INPUT/INOUT without manual_dep, a
//     lookup of every entry on the same buffer address, an edge per overlapping entry
//     (L1 flat ranges, then L2 per-dimension intervals when dtype/ndims/strides match and
//     the layout is row-major), INOUT removing every entry it COVERS; then, after all
//     lookups, INOUT and OUTPUT_EXISTING are inserted as new entries;
//   - edges are deduplicated per producer per submission (flags OR-ed).
//   - besides, every edge as dep_gen lists it (explicit entry, creator or TensorMap hit per
//     argument, not deduplicated), written as deps.json by recorder_write_deps_json();
// Nothing completes or retires, so every entry stays live: the recorded graph is the
// dependency structure, not a schedule. Besides the graph it records the calling interface of
// every submit: func ids, each tensor argument's tag, buffer, start offset, shape and strides,
// each scalar's 64-bit value, and the explicit deps in append order; and per alloc_tensors call
// the buffers it creates. Output format: see recorder_write().

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pto_orchestration_api.h"
#include "recording_runtime.h"

// The recorder's view of the header's private state (declared a friend there).
struct PTO2RecorderAccess {
    template <int T, int S>
    static const ChipTensor* tensor(const TaskArgsTpl<T, S>& a, uint32_t i) { return a.tensors_[i].tensor_; }
    template <int T, int S>
    static const TensorCreateInfo* create_info(const TaskArgsTpl<T, S>& a, uint32_t i) {
        return a.tensors_[i].create_info_;
    }
    static const PTO2TaskId* deps(const CoreTaskArgs& a) { return a.deps_; }
    static const uint32_t* shapes(const TensorCreateInfo& ci) { return ci.shapes_; }
    static uint32_t ndims(const TensorCreateInfo& ci) { return ci.ndims_; }
    static DataType dtype(const TensorCreateInfo& ci) { return ci.dtype_; }
    static bool manual_dep(const TensorCreateInfo& ci) { return ci.manual_dep_; }
    static void set(TaskOutputTensors& out, PTO2TaskId id) { out.id_ = id; }
    static void add(TaskOutputTensors& out, const ChipTensor* t) { out.outs_[out.count_++] = t; }
};

using Access = PTO2RecorderAccess;

namespace {

constexpr int kMaxRingDepth = 4;          // PTO2_MAX_RING_DEPTH
constexpr uint32_t kTaskWindow = 16384;   // PTO2_TASK_WINDOW_SIZE (per ring)
constexpr size_t kMaxScopeDepth = 64;     // PTO2_MAX_SCOPE_DEPTH
constexpr int kClusters = 24;             // a2a3 PLATFORM_MAX_BLOCKDIM (1 AIC + 2 AIV each)
constexpr int kAivCores = 48;
constexpr uint32_t kMaxDims = 5;

enum EdgeKind : int { kExplicit = 1, kCreator = 2, kTensorMap = 4 };

struct ArgRec {
    TensorArgType tag;
    uint64_t addr;
    uint64_t start_offset;
    uint32_t ndims;
    uint32_t shapes[kMaxDims];
    uint32_t strides[kMaxDims];
    DataType dtype;
    int32_t version;
    uint64_t buffer_bytes;
};

// One edge as dep_gen's deps.json lists it (reference §6.1): every explicit dep entry, every
// creator edge and every overlapping TensorMap entry of every argument, before deduplication.
struct EdgeEvent {
    int pred;
    int succ;
    int arg;      // -1 for an explicit dep
    int source;   // kExplicit | kCreator | kTensorMap
    int overlap;  // tensormap only: kCovered or kOther
    ArgRec consumer;
    ArgRec producer;
};

struct TaskRec {
    const char* kind;
    PTO2TaskId id;
    int depth;
    bool manual;
    int scope;
    MixedKernels kernels;
    int blocks;
    bool early;
    bool sync;
    uint32_t dep_entries;
    uint32_t tensors;
    std::vector<ArgRec> args;
    std::vector<uint64_t> scalars;
    std::vector<int> deps;  // producer task indices, in append order
    std::vector<ArgRec> outs;  // alloc tasks: the buffers created, in get_ref order
};

struct ScopeRec {
    PTO2ScopeMode mode;
    int instance;
    uint32_t tasks;
};

struct ScopeInfo {
    int parent;
    int depth;
    PTO2ScopeMode mode;
    int site;
};

struct Entry {
    ChipTensor tensor;
    int producer;
};

struct Recorder {
    PTO2Runtime rt;  // first member: the runtime pointer handed to generated code
    std::vector<TaskRec> tasks;
    std::map<std::pair<int, int>, int> edges;
    std::vector<EdgeEvent> edge_log;
    std::vector<ScopeRec> stack;
    std::vector<ScopeInfo> scopes;
    uint32_t next_local[kMaxRingDepth] = {0, 0, 0, 0};
    std::unordered_map<uint64_t, int> by_raw;
    std::unordered_map<uint64_t, std::vector<Entry>> tensormap;
    std::deque<ChipTensor> outputs;  // alloc outputs: stable addresses (TaskOutputTensors points here)
    uint64_t next_addr = 0x100000000ull;
    int fatal_code = 0;
    std::string fatal_msg;
    int pending_site = 0;
    bool done = false;
};

Recorder g_rec;
PTO2Runtime* g_bound = nullptr;

Recorder& rec(PTO2Runtime* rt) { return *reinterpret_cast<Recorder*>(rt); }

void fatal(Recorder& r, int code, const std::string& msg) {
    if (r.fatal_code != 0) return;
    r.fatal_code = code;
    r.fatal_msg = msg;
}

int depth(const Recorder& r) { return static_cast<int>(r.stack.size()) - 1; }

int current_ring(const Recorder& r) {
    int d = depth(r);
    if (d < 0) d = 0;
    return d < kMaxRingDepth - 1 ? d : kMaxRingDepth - 1;
}

bool in_manual(const Recorder& r) { return !r.stack.empty() && r.stack.back().mode == PTO2ScopeMode::MANUAL; }

// Takes a task slot on the current ring; records the task. Returns its index or -1.
int new_task(Recorder& r, const char* kind) {
    if (r.stack.empty()) {
        fatal(r, 5, "submit outside any scope");
        return -1;
    }
    ScopeRec& top = r.stack.back();
    if (top.tasks >= kTaskWindow - 1) {
        fatal(r, 1, "SCOPE_DEADLOCK: a scope holds task_window - 1 tasks");
        return -1;
    }
    ++top.tasks;
    int ring = current_ring(r);
    TaskRec t{};
    t.kind = kind;
    t.id = PTO2TaskId::make(static_cast<uint8_t>(ring), r.next_local[ring]++);
    t.depth = depth(r);
    t.manual = in_manual(r);
    t.scope = top.instance;
    t.blocks = 0;
    r.by_raw[t.id.raw] = static_cast<int>(r.tasks.size());
    r.tasks.push_back(t);
    return static_cast<int>(r.tasks.size()) - 1;
}

void add_edge(Recorder& r, int pred, int succ, int kind) { r.edges[{pred, succ}] |= kind; }

uint64_t extent(const ChipTensor& t) {
    uint64_t e = 1;
    for (uint32_t d = 0; d < t.ndims; ++d) e += static_cast<uint64_t>(t.shapes[d] - 1) * t.strides[d];
    return e;
}

bool row_major(const ChipTensor& t) {
    if (t.ndims == 0 || t.strides[t.ndims - 1] != 1) return false;
    for (uint32_t d = 0; d + 1 < t.ndims; ++d) {
        if (t.strides[d] < t.strides[d + 1] || t.strides[d] % t.strides[d + 1] != 0) return false;
    }
    return true;
}

bool contiguous(const ChipTensor& t) {
    if (!row_major(t)) return false;
    for (uint32_t d = 0; d + 1 < t.ndims; ++d) {
        if (t.strides[d] != static_cast<uint64_t>(t.strides[d + 1]) * t.shapes[d + 1]) return false;
    }
    return true;
}

// Per-dimension offset of a row-major view, recovered from start_offset and the strides.
uint64_t dim_offset(const ChipTensor& t, uint32_t d) {
    uint64_t rest = d == 0 ? t.start_offset : t.start_offset % t.strides[d - 1];
    return rest / t.strides[d];
}

enum Overlap { kNone, kCovered, kOther };

// simpler check_overlap: `in` is the new argument, `entry` the registered producer region.
Overlap check_overlap(const ChipTensor& in, const ChipTensor& entry) {
    if (in.version != entry.version) return kOther;
    uint64_t a0 = in.start_offset, a1 = a0 + extent(in);
    uint64_t b0 = entry.start_offset, b1 = b0 + extent(entry);
    if (a1 <= b0 || b1 <= a0) return kNone;
    bool same = in.dtype == entry.dtype && in.ndims == entry.ndims && row_major(in) && row_major(entry);
    for (uint32_t d = 0; same && d < in.ndims; ++d) same = in.strides[d] == entry.strides[d];
    if (!same) return kOther;
    bool covered = true;
    for (uint32_t d = 0; d < in.ndims; ++d) {
        uint64_t ilo = dim_offset(in, d), ihi = ilo + in.shapes[d];
        uint64_t elo = dim_offset(entry, d), ehi = elo + entry.shapes[d];
        if (ihi <= elo || ehi <= ilo) return kNone;
        if (!(ilo <= elo && ehi <= ihi)) covered = false;
    }
    return covered ? kCovered : kOther;
}

TaskOutputTensors finish(const Recorder& r, int idx, const std::vector<const ChipTensor*>& made = {}) {
    TaskOutputTensors out;
    Access::set(out, idx < 0 ? PTO2TaskId::invalid() : r.tasks[idx].id);
    for (const ChipTensor* c : made) Access::add(out, c);
    return out;
}

ArgRec arg_of(const ChipTensor& c, TensorArgType tag) {
    ArgRec ar{};
    ar.tag = tag;
    ar.addr = c.buffer.addr;
    ar.start_offset = c.start_offset;
    ar.ndims = c.ndims;
    ar.dtype = c.dtype;
    ar.version = c.version;
    ar.buffer_bytes = c.buffer.size;
    for (uint32_t d = 0; d < c.ndims && d < kMaxDims; ++d) {
        ar.shapes[d] = c.shapes[d];
        ar.strides[d] = c.strides[d];
    }
    return ar;
}

void record_args(TaskRec& t, const CoreTaskArgs& a) {
    t.tensors = a.tensor_count();
    for (uint32_t i = 0; i < a.tensor_count(); ++i) {
        const ChipTensor* c = Access::tensor(a, i);
        ArgRec ar{};
        if (c != nullptr) ar = arg_of(*c, a.tag(i));
        ar.tag = a.tag(i);
        t.args.push_back(ar);
    }
    for (uint32_t i = 0; i < a.scalar_count(); ++i) t.scalars.push_back(a.scalar(i));
}

// The common submit path (simpler submit_task_common): deps, TensorMap, registration.
TaskOutputTensors submit_common(Recorder& r, const MixedKernels& k, const CoreTaskArgs& a, const char* kind,
                                bool dummy) {
    if (a.has_error) {
        fatal(r, 5, std::string("INVALID_ARGS: ") + (a.error_msg ? a.error_msg : "argument error"));
        return TaskOutputTensors{};
    }
    for (uint32_t i = 0; i < a.tensor_count(); ++i) {
        if (a.tag(i) == TensorArgType::OUTPUT && Access::create_info(a, i) == nullptr) {
            fatal(r, 5, "INVALID_ARGS: an OUTPUT argument without a TensorCreateInfo");
            return TaskOutputTensors{};
        }
    }
    int idx = new_task(r, kind);
    if (idx < 0) return TaskOutputTensors{};
    TaskRec& t = r.tasks[idx];
    t.kernels = k;
    t.blocks = dummy ? 0 : a.launch_spec.block_num();
    t.early = a.allow_early_resolve();
    t.sync = dummy ? false : a.launch_spec.require_sync_start();
    t.dep_entries = a.explicit_dep_count();
    record_args(t, a);
    // OUTPUT (add_output(TensorCreateInfo)): the runtime carves each buffer from the heap at
    // submit, owned by this task (later users get a creator edge through owner_task_id); the
    // submit returns them in argument order. No lookup and no TensorMap entry for them.
    std::vector<const ChipTensor*> made;
    for (uint32_t i = 0; i < a.tensor_count(); ++i) {
        if (a.tag(i) != TensorArgType::OUTPUT) continue;
        const TensorCreateInfo& ci = *Access::create_info(a, i);
        ChipTensor c = make_tensor_external(reinterpret_cast<void*>(r.next_addr), Access::shapes(ci), Access::ndims(ci),
                                            Access::dtype(ci), Access::manual_dep(ci));
        c.owner_task_id = t.id;
        r.next_addr += (ci.buffer_size_bytes() + 1023) / 1024 * 1024 + 1024;  // PTO2_PACKED_OUTPUT_ALIGN, never reused
        r.outputs.push_back(c);
        t.args[i] = arg_of(c, TensorArgType::OUTPUT);
        made.push_back(&r.outputs.back());
    }
    const PTO2TaskId* deps = Access::deps(a);
    for (uint32_t i = 0; i < a.explicit_dep_count(); ++i) {
        PTO2TaskId d = deps[i];
        auto it = d.is_valid() ? r.by_raw.find(d.raw) : r.by_raw.end();
        if (it == r.by_raw.end()) {
            fatal(r, 5, d.is_valid() ? "explicit dep on an unknown task id" : "explicit dep on an invalid task id");
            return TaskOutputTensors{};
        }
        r.tasks[idx].deps.push_back(it->second);
        add_edge(r, it->second, idx, kExplicit);
        r.edge_log.push_back(EdgeEvent{it->second, idx, -1, kExplicit, kNone, ArgRec{}, ArgRec{}});
    }
    if (in_manual(r)) return finish(r, idx, made);
    std::vector<const ChipTensor*> reg;
    for (uint32_t i = 0; i < a.tensor_count(); ++i) {
        TensorArgType tag = a.tag(i);
        if (tag == TensorArgType::OUTPUT) continue;  // created above: nothing to look up or insert
        const ChipTensor& c = *Access::tensor(a, i);
        if (c.owner_task_id.is_valid()) {
            auto it = r.by_raw.find(c.owner_task_id.raw);
            if (it != r.by_raw.end()) {
                add_edge(r, it->second, idx, kCreator);
                r.edge_log.push_back(EdgeEvent{it->second, idx, static_cast<int>(i), kCreator, kNone, arg_of(c, tag),
                                               ArgRec{}});
            }
        }
        if ((tag == TensorArgType::INPUT || tag == TensorArgType::INOUT) && !c.manual_dep) {
            auto found = r.tensormap.find(c.buffer.addr);
            if (found != r.tensormap.end()) {
                std::vector<Entry> keep;
                for (const Entry& e : found->second) {
                    Overlap o = check_overlap(c, e.tensor);
                    if (o != kNone && e.producer != idx) {
                        add_edge(r, e.producer, idx, kTensorMap);
                        r.edge_log.push_back(EdgeEvent{e.producer, idx, static_cast<int>(i), kTensorMap, o,
                                                       arg_of(c, tag), arg_of(e.tensor, TensorArgType::INOUT)});
                    }
                    if (o == kCovered && tag == TensorArgType::INOUT) continue;
                    keep.push_back(e);
                }
                found->second.swap(keep);
            }
        }
        if ((tag == TensorArgType::INOUT || tag == TensorArgType::OUTPUT_EXISTING) && !c.manual_dep) reg.push_back(&c);
    }
    for (const ChipTensor* c : reg) r.tensormap[c->buffer.addr].push_back(Entry{*c, idx});
    return finish(r, idx, made);
}

TaskOutputTensors op_submit_task(PTO2Runtime* rt, const MixedKernels& k, const CoreTaskArgs& a) {
    Recorder& r = rec(rt);
    PTO2ResourceShape shape = k.to_active_mask().to_shape();
    if (shape == PTO2ResourceShape::DUMMY || a.launch_spec.block_num() < 1) {
        fatal(r, 5, "INVALID_ARGS: empty kernel mask or block_num < 1");
        return TaskOutputTensors{};
    }
    int limit = shape == PTO2ResourceShape::AIV ? kAivCores : kClusters;
    if (a.launch_spec.require_sync_start() && a.launch_spec.block_num() > 1 && a.launch_spec.block_num() > limit) {
        fatal(r, 7, "REQUIRE_SYNC_START_INVALID: block_num exceeds the cores of its shape");
        return TaskOutputTensors{};
    }
    return submit_common(r, k, a, "compute", false);
}

TaskOutputTensors op_submit_dummy_task(PTO2Runtime* rt, const CoreTaskArgs& a) {
    return submit_common(rec(rt), MixedKernels{}, a, "dummy", true);  // a dummy runs no block
}

TaskOutputTensors op_alloc_tensors(PTO2Runtime* rt, const CoreTaskArgs& a) {
    Recorder& r = rec(rt);
    uint32_t count = a.tensor_count();
    if (a.has_error || count == 0 || count > static_cast<uint32_t>(MAX_TENSOR_ARGS) || a.scalar_count() != 0) {
        fatal(r, 5, "alloc_tensors: bad create-info list");
        return TaskOutputTensors{};
    }
    for (uint32_t i = 0; i < count; ++i) {
        if (a.tag(i) != TensorArgType::OUTPUT) {
            fatal(r, 5, "alloc_tensors accepts OUTPUT create-infos only");
            return TaskOutputTensors{};
        }
    }
    int idx = new_task(r, "alloc");
    if (idx < 0) return TaskOutputTensors{};
    TaskRec& t = r.tasks[idx];
    t.early = true;  // alloc tasks complete inline with allow_early_resolve forced on
    t.tensors = count;
    TaskOutputTensors out;
    Access::set(out, t.id);
    for (uint32_t i = 0; i < count; ++i) {
        const TensorCreateInfo& ci = *Access::create_info(a, i);
        ChipTensor c = make_tensor_external(reinterpret_cast<void*>(r.next_addr), Access::shapes(ci), Access::ndims(ci),
                                            Access::dtype(ci), Access::manual_dep(ci));
        c.owner_task_id = t.id;
        r.next_addr += (ci.buffer_size_bytes() + 1023) / 1024 * 1024 + 1024;  // PTO2_PACKED_OUTPUT_ALIGN, never reused
        r.outputs.push_back(c);
        t.outs.push_back(arg_of(c, TensorArgType::OUTPUT));
        Access::add(out, &r.outputs.back());
    }
    return out;
}

void op_scope_begin(PTO2Runtime* rt) {
    Recorder& r = rec(rt);
    PTO2ScopeMode mode = rt->pending_scope_mode;
    rt->pending_scope_mode = PTO2ScopeMode::AUTO;
    if (in_manual(r) && mode == PTO2ScopeMode::AUTO) fatal(r, 5, "INVALID_ARGS: AUTO scope inside a MANUAL scope");
    if (r.stack.size() >= kMaxScopeDepth) fatal(r, 5, "scope nesting deeper than 64");
    int parent = r.stack.empty() ? -1 : r.stack.back().instance;
    int instance = static_cast<int>(r.scopes.size());
    r.scopes.push_back(ScopeInfo{parent, static_cast<int>(r.stack.size()), mode, r.pending_site});
    r.pending_site = 0;
    r.stack.push_back(ScopeRec{mode, instance, 0});
}

void op_scope_end(PTO2Runtime* rt) {
    Recorder& r = rec(rt);
    if (r.stack.empty()) {
        fatal(r, 5, "scope_end without scope_begin");
        return;
    }
    r.stack.pop_back();
}

void op_scope_set_site(PTO2Runtime* rt, const char*, int line) { rec(rt).pending_site = line; }
void op_orchestration_done(PTO2Runtime* rt) { rec(rt).done = true; }
bool op_is_fatal(PTO2Runtime* rt) { return rec(rt).fatal_code != 0; }

void op_report_fatal(PTO2Runtime* rt, int32_t code, const char* func, const char* fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt ? fmt : "", ap);
    va_end(ap);
    fatal(rec(rt), code, std::string(func ? func : "?") + ": " + msg);
}

void op_log(PTO2Runtime*, const char*, ...) {}
uint64_t op_get_tensor_data(PTO2Runtime* rt, const ChipTensor&, uint32_t, const uint32_t*) {
    fatal(rec(rt), 5, "the recorder does not model get_tensor_data");
    return 0;
}
void op_set_tensor_data(PTO2Runtime* rt, const ChipTensor&, uint32_t, const uint32_t*, uint64_t) {
    fatal(rec(rt), 5, "the recorder does not model set_tensor_data");
}
int op_available_cluster_count(PTO2Runtime*) { return kClusters; }
int op_available_aiv_count(PTO2Runtime*) { return kAivCores; }

const PTO2RuntimeOps kOps = {
    op_submit_task,  op_submit_dummy_task, op_alloc_tensors, op_scope_begin,       op_scope_end,
    op_scope_set_site, op_orchestration_done, op_is_fatal,   op_report_fatal,      op_log,
    op_log,          op_log,               op_log,           op_log,               op_get_tensor_data,
    op_set_tensor_data, op_available_cluster_count, op_available_aiv_count,
};

const char* tag_name(TensorArgType t) {
    switch (t) {
        case TensorArgType::INPUT: return "INPUT";
        case TensorArgType::OUTPUT: return "OUTPUT";
        case TensorArgType::INOUT: return "INOUT";
        case TensorArgType::OUTPUT_EXISTING: return "OUTPUT_EXISTING";
        default: return "NO_DEP";
    }
}

void view_fatal(const char* what) {
    if (g_bound != nullptr) fatal(rec(g_bound), 5, std::string("INVALID_ARGS: ") + what);
}

void write_arg(FILE* f, const char* kind, size_t task, const ArgRec& a) {
    fprintf(f, "%s %zu %s %llu %llu %u %d", kind, task, tag_name(a.tag), static_cast<unsigned long long>(a.addr),
            static_cast<unsigned long long>(a.start_offset), a.ndims, static_cast<int>(a.dtype));
    for (uint32_t d = 0; d < a.ndims; ++d) fprintf(f, " %u", a.shapes[d]);
    for (uint32_t d = 0; d < a.ndims; ++d) fprintf(f, " %u", a.strides[d]);
    fprintf(f, "\n");
}

}  // namespace

// ---- ChipTensor ----
uint64_t ChipTensor::extent_elem() const {
    uint64_t n = 1;
    for (uint32_t d = 0; d < ndims; ++d) n *= shapes[d];
    return n;
}

uint64_t ChipTensor::nbytes() const { return extent_elem() * get_element_size(dtype); }

ChipTensor ChipTensor::view(const uint32_t view_shapes[], const uint32_t offsets[], bool in_manual_dep) const {
    ChipTensor out = *this;
    bool empty = false;
    for (uint32_t d = 0; d < ndims; ++d) empty = empty || view_shapes[d] == 0;
    for (uint32_t d = 0; d < ndims; ++d) {
        if (!empty && static_cast<uint64_t>(offsets[d]) + view_shapes[d] > shapes[d]) {
            view_fatal("a view reaches outside its source tensor");
        }
        out.shapes[d] = view_shapes[d];
        if (!empty) out.start_offset += static_cast<uint64_t>(offsets[d]) * strides[d];
    }
    out.manual_dep = manual_dep || in_manual_dep;
    return out;
}

ChipTensor ChipTensor::reshape(const uint32_t new_shapes[], uint32_t new_ndims, bool in_manual_dep) const {
    ChipTensor out = *this;
    uint64_t n = 1;
    for (uint32_t d = 0; d < new_ndims && d < kMaxDims; ++d) n *= new_shapes[d];
    if (!contiguous(*this)) view_fatal("reshape of a non-contiguous tensor");
    if (n != extent_elem() || new_ndims == 0 || new_ndims > kMaxDims) view_fatal("reshape changes the element count");
    out.ndims = new_ndims;
    uint64_t stride = 1;
    for (int d = static_cast<int>(new_ndims) - 1; d >= 0; --d) {
        out.shapes[d] = new_shapes[d];
        out.strides[d] = static_cast<uint32_t>(stride);
        stride *= new_shapes[d];
    }
    out.manual_dep = manual_dep || in_manual_dep;
    return out;
}

ChipTensor ChipTensor::transpose(uint32_t a, uint32_t b) const {
    ChipTensor out = *this;
    if (a >= ndims || b >= ndims) view_fatal("transpose of a dimension the tensor does not have");
    else {
        out.shapes[a] = shapes[b];
        out.shapes[b] = shapes[a];
        out.strides[a] = strides[b];
        out.strides[b] = strides[a];
    }
    return out;
}

ChipTensor ChipTensor::permute(const uint32_t order[], uint32_t n) const {
    ChipTensor out = *this;
    if (n != ndims) view_fatal("permute with another number of dimensions");
    for (uint32_t d = 0; d < n && d < ndims; ++d) {
        out.shapes[d] = shapes[order[d]];
        out.strides[d] = strides[order[d]];
    }
    return out;
}

ChipTensor ChipTensor::slice(uint32_t dim, uint32_t start, uint32_t length) const {
    ChipTensor out = *this;
    if (dim >= ndims || static_cast<uint64_t>(start) + length > shapes[dim]) view_fatal("slice outside its source");
    else {
        out.shapes[dim] = length;
        out.start_offset += static_cast<uint64_t>(start) * strides[dim];
    }
    return out;
}

ChipTensor make_tensor_external(void* addr, const uint32_t shapes[], uint32_t ndims, DataType dtype, bool manual_dep,
                                int32_t version, AddressSpace) {
    ChipTensor c{};
    c.buffer.addr = reinterpret_cast<uint64_t>(addr);
    c.owner_task_id = PTO2TaskId::invalid();
    c.version = version;
    c.manual_dep = manual_dep;
    c.dtype = dtype;
    c.ndims = ndims;
    uint64_t stride = 1;
    for (int d = static_cast<int>(ndims) - 1; d >= 0; --d) {
        c.shapes[d] = shapes[d];
        c.strides[d] = static_cast<uint32_t>(stride);
        stride *= shapes[d];
    }
    c.buffer.size = stride * get_element_size(dtype);
    return c;
}

// ---- binding ----
extern "C" void framework_bind_runtime(PTO2Runtime* rt) { g_bound = rt; }

PTO2Runtime* framework_current_runtime() {
    if (g_bound == nullptr) {
        fprintf(stderr, "recording runtime: no runtime bound\n");
        abort();
    }
    return g_bound;
}

PTO2Runtime* recorder_runtime() {
    g_rec.rt.ops = &kOps;
    g_rec.rt.pending_scope_mode = PTO2ScopeMode::AUTO;
    return &g_rec.rt;
}

int recorder_open_scopes() { return static_cast<int>(g_rec.stack.size()); }
int recorder_fatal_code() { return g_rec.fatal_code; }

// One line per record, space separated:
//   scope <instance> <parent> <depth> <auto|manual> <site line>
//   task <index> <compute|dummy|alloc> <ring> <local> <depth> <auto|manual> <scope instance>
//        <aic> <aiv0> <aiv1> <block_num> <early 0|1> <sync_start 0|1> <dep entries> <tensors>
//   arg <task index> <INPUT|INOUT|OUTPUT_EXISTING|...> <buffer addr> <start_offset> <ndims> <dtype>
//       <shape...> <strides...>
//   scalar <task index> <position> <64-bit value>
//   dep <task index> <position> <producer task index>
//   out <alloc task index> OUTPUT <buffer addr> 0 <ndims> <dtype> <shape...> <strides...>
//   edge <pred index> <succ index> <flags: 1 explicit | 2 creator | 4 tensormap>
//   fatal <code> <message>            (only when the run hit a fatal error)
bool recorder_write(const char* path) {
    FILE* f = fopen(path, "w");
    if (f == nullptr) return false;
    const Recorder& r = g_rec;
    for (size_t i = 0; i < r.scopes.size(); ++i) {
        const ScopeInfo& s = r.scopes[i];
        fprintf(f, "scope %zu %d %d %s %d\n", i, s.parent, s.depth, s.mode == PTO2ScopeMode::MANUAL ? "manual" : "auto",
                s.site);
    }
    for (size_t i = 0; i < r.tasks.size(); ++i) {
        const TaskRec& t = r.tasks[i];
        fprintf(f, "task %zu %s %u %u %d %s %d %d %d %d %d %d %d %u %u\n", i, t.kind, static_cast<unsigned>(t.id.ring()),
                t.id.local(), t.depth, t.manual ? "manual" : "auto", t.scope, t.kernels.aic_kernel_id,
                t.kernels.aiv0_kernel_id, t.kernels.aiv1_kernel_id, t.blocks, t.early ? 1 : 0, t.sync ? 1 : 0,
                t.dep_entries, t.tensors);
        for (const ArgRec& a : t.args) write_arg(f, "arg", i, a);
        for (size_t j = 0; j < t.scalars.size(); ++j) {
            fprintf(f, "scalar %zu %zu %llu\n", i, j, static_cast<unsigned long long>(t.scalars[j]));
        }
        for (size_t j = 0; j < t.deps.size(); ++j) fprintf(f, "dep %zu %zu %d\n", i, j, t.deps[j]);
        for (const ArgRec& a : t.outs) write_arg(f, "out", i, a);
    }
    for (const auto& e : r.edges) fprintf(f, "edge %d %d %d\n", e.first.first, e.first.second, e.second);
    if (r.fatal_code != 0) fprintf(f, "fatal %d %s\n", r.fatal_code, r.fatal_msg.c_str());
    return fclose(f) == 0;
}

// ---- deps.json (docs/upstream.md §2.7) ----
namespace {

const char* dtype_name(DataType t) {
    static const char* names[] = {"FLOAT32", "FLOAT16", "INT32",  "INT16", "INT8",      "UINT8",   "BFLOAT16", "INT64",
                                  "UINT64",  "UINT16",  "UINT32", "BOOL",  "FP8E4M3FN", "FP8E8M0", "FP4E2M1"};
    unsigned v = static_cast<unsigned>(t);
    return v < sizeof names / sizeof names[0] ? names[v] : "UNKNOWN";
}

// tensor_id: 64-bit FNV-1a over the buffer address (8 bytes, little endian) and the version
// (4 bytes, little endian).
uint64_t tensor_id(uint64_t addr, int32_t version) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 8; ++i) {
        h ^= (addr >> (8 * i)) & 0xffu;
        h *= 0x100000001b3ull;
    }
    uint32_t v = static_cast<uint32_t>(version);
    for (int i = 0; i < 4; ++i) {
        h ^= (v >> (8 * i)) & 0xffu;
        h *= 0x100000001b3ull;
    }
    return h;
}

void write_dims(FILE* f, const char* key, const uint32_t* v, uint32_t n) {
    fprintf(f, "\"%s\": [", key);
    for (uint32_t d = 0; d < n; ++d) fprintf(f, "%s%u", d ? ", " : "", v[d]);
    fprintf(f, "]");
}

void write_region(FILE* f, const char* prefix, const ArgRec& a) {
    std::string k = std::string(prefix) + "shape";
    write_dims(f, k.c_str(), a.shapes, a.ndims);
    fprintf(f, ", \"%sstart_offset\": %llu, ", prefix, static_cast<unsigned long long>(a.start_offset));
    k = std::string(prefix) + "strides";
    write_dims(f, k.c_str(), a.strides, a.ndims);
}

}  // namespace

// deps.json as dep_gen writes it: tasks[] (compute and dummy submits, in submit order; alloc
// tasks absent), tensors[] (every buffer an argument names, in first-use order), edges[] (in
// the order the submits met them). 64-bit ids are JSON strings.
bool recorder_write_deps_json(const char* path) {
    FILE* f = fopen(path, "w");
    if (f == nullptr) return false;
    const Recorder& r = g_rec;
    std::vector<std::pair<uint64_t, const ArgRec*>> tensors;
    std::map<uint64_t, bool> seen;
    fprintf(f, "{\"tasks\": [");
    bool first = true;
    for (const TaskRec& t : r.tasks) {
        if (std::string(t.kind) == "alloc") continue;
        fprintf(f, "%s\n{\"task_id\": \"%llu\", \"scope\": \"%s\", \"early_dispatch\": %s, \"kernel_ids\": [%d, %d, %d], "
                   "\"block_num\": %d, \"args\": [",
                first ? "" : ",", static_cast<unsigned long long>(t.id.raw), t.manual ? "manual" : "auto",
                t.early ? "true" : "false", t.kernels.aic_kernel_id, t.kernels.aiv0_kernel_id, t.kernels.aiv1_kernel_id,
                t.blocks);
        first = false;
        for (size_t i = 0; i < t.args.size(); ++i) {
            const ArgRec& a = t.args[i];
            uint64_t id = tensor_id(a.addr, a.version);
            if (!seen[id]) {
                seen[id] = true;
                tensors.emplace_back(id, &a);
            }
            fprintf(f, "%s{\"idx\": %zu, \"type\": \"%s\", \"tensor_id\": \"%llu\", \"dtype\": \"%s\", ", i ? ", " : "", i,
                    tag_name(a.tag), static_cast<unsigned long long>(id), dtype_name(a.dtype));
            write_region(f, "", a);
            fprintf(f, "}");
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n],\n\"tensors\": [");
    first = true;
    for (const auto& [id, a] : tensors) {
        fprintf(f, "%s\n{\"tensor_id\": \"%llu\", \"buffer_addr\": \"%llu\", \"version\": %d, \"dtype\": \"%s\", "
                   "\"buffer_numel\": %llu}",
                first ? "" : ",", static_cast<unsigned long long>(id), static_cast<unsigned long long>(a->addr),
                a->version, dtype_name(a->dtype),
                static_cast<unsigned long long>(a->buffer_bytes / get_element_size(a->dtype)));
        first = false;
    }
    fprintf(f, "\n],\n\"edges\": [");
    first = true;
    for (const EdgeEvent& e : r.edge_log) {
        const char* source = e.source == kExplicit ? "explicit" : e.source == kCreator ? "creator" : "tensormap";
        const char* flags = e.source == kTensorMap ? "[\"wait\"]" : "[\"wait\", \"retain\"]";
        fprintf(f, "%s\n{\"pred\": \"%llu\", \"succ\": \"%llu\", \"arg\": %d, \"source\": \"%s\", \"flags\": %s",
                first ? "" : ",", static_cast<unsigned long long>(r.tasks[e.pred].id.raw),
                static_cast<unsigned long long>(r.tasks[e.succ].id.raw), e.arg, source, flags);
        first = false;
        if (e.source != kExplicit) {
            fprintf(f, ", \"tensor_id\": \"%llu\", \"consumer_dtype\": \"%s\", ",
                    static_cast<unsigned long long>(tensor_id(e.consumer.addr, e.consumer.version)),
                    dtype_name(e.consumer.dtype));
            write_region(f, "consumer_", e.consumer);
        }
        if (e.source == kTensorMap) {
            fprintf(f, ", \"overlap\": \"%s\", ", e.overlap == kCovered ? "covered" : "other");
            write_region(f, "producer_", e.producer);
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
    return fclose(f) == 0;
}
