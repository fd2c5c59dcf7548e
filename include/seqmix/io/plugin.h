#pragma once
// seqmix's dlopen plugins (the SentencePiece tokenizer, the NCCL backend): shared libraries that keep a
// dependency out of the seqmix program, found next to the running program, else where the build put them.
#include <string>

namespace seqmix {

// The handle of the plugin file_name (e.g. "libseqmix_nccl.so"), looked for next to the running program,
// then at build_path. Throws Error naming `what`, both places and dlerror's reasons when none loads.
// flags are dlopen's (RTLD_NOW | RTLD_LOCAL, with RTLD_DEEPBIND where the plugin's libraries clash).
void* open_plugin(const std::string& what, const std::string& file_name, const std::string& build_path, int flags);

// The plugin's symbol `name`; throws Error naming `what` and the symbol when it lacks it.
void* plugin_symbol(void* handle, const std::string& what, const char* name);

}  // namespace seqmix
