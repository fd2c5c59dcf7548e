#pragma once
// The C interface of libseqmix_sentencepiece.so, the plugin that holds SentencePiece.
//
// Why a plugin: Debian's libsentencepiece bundles its own protobuf-lite 3.14 and exports its symbols,
// while LibTorch loads the system libprotobuf 3.21. Linked into one program, whichever copy the dynamic
// linker meets first serves both, and the program crashes at start-up (or aborts on protobuf's version
// check). seqmix therefore loads SentencePiece with dlopen(RTLD_LOCAL | RTLD_DEEPBIND): the plugin and its
// libraries resolve their own symbols first and stay out of the global scope.
//
// Only C types cross the boundary. Buffers the plugin returns are malloc'ed; the caller frees them with
// free() (one libc serves both sides). Functions return 0 on success; on failure *error holds a
// malloc'ed message.
#include <stddef.h>
#include <stdint.h>

extern "C" {
// Trains a BPE model on text, cut into training sentences after each newline_piece (which becomes a user-defined
// piece); *model receives the serialized model proto.
typedef int (*seqmix_sp_train_fn)(const char* text, size_t text_len, int64_t vocab_size, const char* newline_piece,
                                  char** model, size_t* model_len, char** error);
// Loads a serialized model; *handle receives a processor to pass to encode, decode, size and release.
typedef int (*seqmix_sp_load_fn)(const char* model, size_t model_len, void** handle, char** error);
typedef int (*seqmix_sp_encode_fn)(void* handle, const char* text, size_t text_len, int32_t** ids, size_t* count,
                                   char** error);
typedef int (*seqmix_sp_decode_fn)(void* handle, const int32_t* ids, size_t count, char** text, size_t* text_len,
                                   char** error);
typedef int64_t (*seqmix_sp_size_fn)(void* handle);
// 1 when the model's vocabulary holds this piece (exactly, not through the unknown piece), else 0.
typedef int (*seqmix_sp_has_piece_fn)(void* handle, const char* piece, size_t piece_len);
typedef void (*seqmix_sp_release_fn)(void* handle);
}
