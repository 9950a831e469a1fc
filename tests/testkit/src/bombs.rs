//! Compression bombs: bodies of a few kilobytes that decode to [`BOMB_DECOMPRESSED_LEN`]
//! zero bytes, in gzip, zlib-wrapped deflate (as HTTP's `deflate` is), Brotli, zstd, and gzip
//! of the gzip bomb (for `Content-Encoding: gzip, gzip`).
//!
//! Each is made by the real encoder (flate2, brotli, zstd) at its strongest useful setting,
//! so its trailer (CRC-32 and length, Adler-32, content size) is right and a decoder that
//! checks it is satisfied. Encoding 100 MiB takes a moment, so a bomb is built the first
//! time it is requested, off the async threads, and then shared by every server in the
//! process. Serving them is the routes' business.

use std::io::{self, Write};
use std::sync::OnceLock;

use flate2::Compression;
use flate2::write::{GzEncoder, ZlibEncoder};

/// Size of the decompressed body of every `/bomb/*` route: 100 MiB.
pub const BOMB_DECOMPRESSED_LEN: usize = 100 * 1024 * 1024;

/// One of the bombs, by the encoding it is served with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bomb {
    /// `gzip`.
    Gzip,
    /// `deflate`: a zlib stream.
    Deflate,
    /// `br`.
    Brotli,
    /// `zstd`.
    Zstd,
    /// `gzip, gzip`: the gzip bomb, gzipped again.
    Nested,
}

impl Bomb {
    /// The `Content-Encoding` the bomb is served with.
    pub(crate) fn content_encoding(self) -> &'static str {
        match self {
            Bomb::Gzip => "gzip",
            Bomb::Deflate => "deflate",
            Bomb::Brotli => "br",
            Bomb::Zstd => "zstd",
            Bomb::Nested => "gzip, gzip",
        }
    }

    /// The compressed body, built on first use on a blocking thread.
    pub(crate) async fn body(self) -> io::Result<&'static [u8]> {
        let cell = self.cell();
        if let Some(body) = cell.get() {
            return Ok(body);
        }
        tokio::task::spawn_blocking(move || self.built())
            .await
            .map_err(io::Error::other)
    }

    fn cell(self) -> &'static OnceLock<Vec<u8>> {
        static GZIP: OnceLock<Vec<u8>> = OnceLock::new();
        static DEFLATE: OnceLock<Vec<u8>> = OnceLock::new();
        static BROTLI: OnceLock<Vec<u8>> = OnceLock::new();
        static ZSTD: OnceLock<Vec<u8>> = OnceLock::new();
        static NESTED: OnceLock<Vec<u8>> = OnceLock::new();
        match self {
            Bomb::Gzip => &GZIP,
            Bomb::Deflate => &DEFLATE,
            Bomb::Brotli => &BROTLI,
            Bomb::Zstd => &ZSTD,
            Bomb::Nested => &NESTED,
        }
    }

    /// The body, building it (blocking) if no one has yet.
    fn built(self) -> &'static [u8] {
        self.cell().get_or_init(|| match self {
            Bomb::Gzip => gzip_zeros(BOMB_DECOMPRESSED_LEN),
            Bomb::Deflate => zlib_zeros(BOMB_DECOMPRESSED_LEN),
            Bomb::Brotli => brotli_zeros(BOMB_DECOMPRESSED_LEN),
            Bomb::Zstd => zstd_zeros(BOMB_DECOMPRESSED_LEN),
            Bomb::Nested => {
                let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
                encoder
                    .write_all(Bomb::Gzip.built())
                    .expect("writing to a Vec cannot fail");
                encoder.finish().expect("writing to a Vec cannot fail")
            }
        })
    }
}

/// Writes `len` zero bytes into `encoder`, 1 MiB at a time.
fn write_zeros<W: Write>(mut encoder: W, len: usize) -> W {
    let zeros = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let take = left.min(zeros.len());
        encoder
            .write_all(&zeros[..take])
            .expect("writing to a Vec cannot fail");
        left -= take;
    }
    encoder
}

/// Gzip of `len` zero bytes. The strongest level codes each run of 258 zeros in a couple of
/// bits, about 1/1000 of the decoded size; faster levels use fixed codes several times larger.
fn gzip_zeros(len: usize) -> Vec<u8> {
    write_zeros(GzEncoder::new(Vec::new(), Compression::best()), len)
        .finish()
        .expect("writing to a Vec cannot fail")
}

/// A zlib stream (deflate with the zlib header and Adler-32 trailer) of `len` zero bytes.
fn zlib_zeros(len: usize) -> Vec<u8> {
    write_zeros(ZlibEncoder::new(Vec::new(), Compression::best()), len)
        .finish()
        .expect("writing to a Vec cannot fail")
}

/// A Brotli stream of `len` zero bytes.
fn brotli_zeros(len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    {
        // Quality 5 compresses 100 MiB of zeros to under 100 bytes, fast.
        let mut writer = write_zeros(brotli::CompressorWriter::new(&mut out, 1 << 16, 5, 22), len);
        writer.flush().expect("writing to a Vec cannot fail");
    }
    out
}

/// A zstd frame of `len` zero bytes that declares its content size. The encoder writes each
/// 128 KiB block of zeros as a 4-byte RLE block.
fn zstd_zeros(len: usize) -> Vec<u8> {
    let mut encoder =
        zstd::stream::write::Encoder::new(Vec::new(), 1).expect("zstd accepts level 1");
    encoder
        .set_pledged_src_size(Some(len as u64))
        .expect("a frame may declare its size");
    encoder
        .include_contentsize(true)
        .expect("a frame may declare its size");
    write_zeros(encoder, len)
        .finish()
        .expect("writing to a Vec cannot fail")
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn small_streams_decode_to_zeros() {
        for len in [0usize, 1, 2, 258, 259, 517, 1000] {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&gzip_zeros(len)[..])
                .read_to_end(&mut out)
                .expect("gzip decodes");
            assert_eq!(out, vec![0u8; len]);
            out.clear();
            flate2::read::ZlibDecoder::new(&zlib_zeros(len)[..])
                .read_to_end(&mut out)
                .expect("zlib decodes");
            assert_eq!(out, vec![0u8; len]);
            out.clear();
            brotli::Decompressor::new(&brotli_zeros(len)[..], 4096)
                .read_to_end(&mut out)
                .expect("brotli decodes");
            assert_eq!(out, vec![0u8; len]);
            assert_eq!(
                zstd::decode_all(&zstd_zeros(len)[..]).expect("zstd decodes"),
                vec![0u8; len]
            );
        }
    }
}
