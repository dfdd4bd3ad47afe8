// pgraph recording runtime: driver-side hooks (not part of simpler's API).
#pragma once

#include "pto_orchestration_api.h"

// The recording runtime instance (bind it with framework_bind_runtime).
PTO2Runtime* recorder_runtime();
// Scopes still open (1 after the driver's root scope_begin, 0 after its scope_end).
int recorder_open_scopes();
// The first fatal error code (0: none).
int recorder_fatal_code();
// Write the record (format: recording_runtime.cpp, recorder_write). False on I/O error.
bool recorder_write(const char* path);
// Write the graph as deps.json (format: recording_runtime.cpp, recorder_write_deps_json). False on I/O error.
bool recorder_write_deps_json(const char* path);
