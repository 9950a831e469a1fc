//! The compression bombs: small on the wire, 100 MiB of zeros once decoded, trailers intact.

use testkit::{BOMB_DECOMPRESSED_LEN, FixtureServer};

use crate::{decoded_zero_len, get};

#[tokio::test]
async fn gzip_deflate_and_nested_bombs_decompress_to_100_mib() {
    let server = FixtureServer::start().await.unwrap();
    let gz = get(&server, "/bomb/gzip").await;
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert!(gz.header("content-type").unwrap().starts_with("text/html"));
    assert!(
        gz.body.len() < 200 * 1024,
        "gzip bomb is {} bytes",
        gz.body.len()
    );
    let df = get(&server, "/bomb/deflate").await;
    assert_eq!(df.header("content-encoding"), Some("deflate"));
    let nested = get(&server, "/bomb/nested").await;
    assert_eq!(nested.header("content-encoding"), Some("gzip, gzip"));
    assert!(
        nested.body.len() < 10 * 1024,
        "nested bomb is {} bytes",
        nested.body.len()
    );
    tokio::task::spawn_blocking(move || {
        // GzDecoder verifies the CRC-32 and ISIZE trailer.
        assert_eq!(
            decoded_zero_len(flate2::read::GzDecoder::new(&gz.body[..])),
            BOMB_DECOMPRESSED_LEN
        );
        // ZlibDecoder verifies the Adler-32 trailer.
        assert_eq!(
            decoded_zero_len(flate2::read::ZlibDecoder::new(&df.body[..])),
            BOMB_DECOMPRESSED_LEN
        );
        let inner = flate2::read::GzDecoder::new(&nested.body[..]);
        assert_eq!(
            decoded_zero_len(flate2::read::GzDecoder::new(inner)),
            BOMB_DECOMPRESSED_LEN
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn brotli_bomb_decompresses_to_100_mib() {
    let server = FixtureServer::start().await.unwrap();
    let br = get(&server, "/bomb/br").await;
    assert_eq!(br.header("content-encoding"), Some("br"));
    assert!(
        br.body.len() < 4096,
        "brotli bomb is {} bytes",
        br.body.len()
    );
    tokio::task::spawn_blocking(move || {
        assert_eq!(
            decoded_zero_len(brotli::Decompressor::new(&br.body[..], 4096)),
            BOMB_DECOMPRESSED_LEN
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn zstd_bomb_decompresses_to_100_mib() {
    let server = FixtureServer::start().await.unwrap();
    let zs = get(&server, "/bomb/zstd").await;
    assert_eq!(zs.header("content-encoding"), Some("zstd"));
    assert!(
        zs.body.len() < 8 * 1024,
        "zstd bomb is {} bytes",
        zs.body.len()
    );
    tokio::task::spawn_blocking(move || {
        let decoder = zstd::stream::read::Decoder::new(&zs.body[..]).unwrap();
        assert_eq!(decoded_zero_len(decoder), BOMB_DECOMPRESSED_LEN);
    })
    .await
    .unwrap();
}
