//
// Created by Kai Zhao on 4/21/20.
//

#ifndef SZ3_LOSSLESS_ZSTD_HPP
#define SZ3_LOSSLESS_ZSTD_HPP

#include <new>
#include <stdexcept>
#include <stdexcept>

#include "SZ3/def.hpp"
#include "SZ3/lossless/Lossless.hpp"
#include "SZ3/utils/MemoryUtil.hpp"
#include "zstd.h"

namespace SZ3 {
/// tgm-xarray: the most bytes a zstd stage that SZ3 allocates itself may decode to on this
/// thread (0: no limit). The FFI shim sets it from the element count, which the reader has
/// checked against the object's descriptor: the stream's own size field cannot make a small
/// object allocate and fill gigabytes.
inline thread_local size_t tgm_zstd_stage_limit = 0;

class Lossless_zstd : public concepts::LosslessInterface {
   public:
    Lossless_zstd() = default;

    Lossless_zstd(int comp_level) : compression_level(comp_level) {}

    /**
     * Attention
     * When dstCap is smaller than the space needed, ZSTD will not throw any errors.
     * Instead, it will write a portion of the compressed data to dst and stops.
     * This behavior is not desirable in SZ, as we need the whole compressed data for decompression.
     * Therefore, we need to check if the dst buffer (dstCap) is large enough for zstd
     */
    size_t compress(const uchar *src, size_t srcLen, uchar *dst, size_t dstCap) override {
        write(srcLen, dst);
        dstCap -= sizeof(size_t);  // reserve space for srcLen
        if (dstCap < ZSTD_compressBound(srcLen)) {
            throw std::length_error(SZ3_ERROR_COMP_BUFFER_NOT_LARGE_ENOUGH);
        }
        size_t dstLen = ZSTD_compress(dst, dstCap, src, srcLen, compression_level);
        return dstLen + sizeof(size_t);
    }

    size_t decompress(const uchar *src, const size_t srcLen, uchar *&dst, size_t &dstLen) override {
        // tgm-xarray: with a caller's `dst`, `dstLen` comes in as its capacity; the size the
        // stream records may not exceed it (the lossless algorithm decodes into the output).
        const size_t capacity = dstLen;
        read(dstLen, src);
        if (dst != nullptr && dstLen > capacity) {
            throw std::length_error("SZ3: the zstd stage is larger than the output");
        }
        if (srcLen < sizeof(dstLen)) {
            throw std::length_error("SZ3: corrupt zstd stage");
        }
        if (dst == nullptr && tgm_zstd_stage_limit != 0 && dstLen > tgm_zstd_stage_limit) {
            throw std::length_error("SZ3: the zstd stage is larger than its element count allows");
        }
        if (dst == nullptr) {
            // tgm-xarray: zeros after the decoded bytes, so that a reader of a corrupt stage that
            // overruns it by a little reads zeros (the stages check their sizes besides).
            if (dstLen > SIZE_MAX - kReadPad) {
                throw std::bad_alloc();
            }
            dst = static_cast<uchar *>(malloc(dstLen + kReadPad));
            // tgm-xarray: `dstLen` comes from the stream; a corrupt one must not become a write
            // through a null pointer (the FFI shim catches the exception).
            if (dst == nullptr) {
                throw std::bad_alloc();
            }
            memset(dst + dstLen, 0, kReadPad);
        }
        size_t written = ZSTD_decompress(dst, dstLen, src, srcLen - sizeof(dstLen));
        if (ZSTD_isError(written) || written != dstLen) {
            throw std::runtime_error("SZ3: corrupt zstd stage");
        }
        return written;
    }

    /// Zero bytes after a decoded buffer (tgm-xarray).
    static constexpr size_t kReadPad = 64;

   private:
    int compression_level = 3;  // default setting of level is 3
};
}  // namespace SZ3
#endif  // SZ_LOSSLESS_ZSTD_HPP
