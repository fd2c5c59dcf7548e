#pragma once
// Checksums of files seqmix writes.
#include <cstdint>
#include <string>

namespace seqmix {

// SHA-256 of bytes as 64 lowercase hex digits (OpenSSL's libcrypto): what `sha256sum FILE` prints, so a
// checkpoint's files can be checked against its record with the coreutils.
std::string sha256_hex(const std::string& bytes);

// 64-bit FNV-1a with the offset basis 1469598103934665603 (one digit short of the standard 14695981039346656037).
// Kept for what was written with it: format-1 checkpoint records (checkpoint.cpp reads them) and MAD run folder
// names (mad.cpp), which must stay the same.
uint64_t fnv1a64_seqmix(const std::string& bytes);

}  // namespace seqmix
