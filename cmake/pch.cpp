// The translation unit the precompiled LibTorch headers are made with (seqmix_pch_target in CMakeLists.txt).
