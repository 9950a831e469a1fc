//! The charset routes: pages whose text is "café résumé" in ISO-8859-1 (declared by the
//! header or by a `<meta>`), in UTF-8 or UTF-16 announced only by a byte-order mark, or
//! under a charset no one knows, and a Shift_JIS page declared by `http-equiv`.
//!
//! They test the client's charset detection and decoding; every page decodes to
//! [`CHARSET_TEXT`] or [`CHARSET_TEXT_JA`] when read right, and to something else otherwise.

use std::io;

use crate::request::Request;
use crate::response::Conn;

/// Answers the charset routes; `None` for any other path.
pub(super) async fn route(conn: &mut Conn, req: &Request) -> Option<io::Result<()>> {
    let done = match req.path.as_str() {
        "/charset/latin1-header" => {
            conn.send(
                200,
                &[("Content-Type", "text/html; charset=ISO-8859-1")],
                &latin1_page(false),
            )
            .await
        }
        "/charset/latin1-meta" => {
            conn.send(200, &[("Content-Type", "text/html")], &latin1_page(true))
                .await
        }
        "/charset/sjis-meta" => {
            conn.send(200, &[("Content-Type", "text/html")], &sjis_page())
                .await
        }
        "/charset/utf8-bom" => {
            let mut body = vec![0xEF, 0xBB, 0xBF];
            body.extend_from_slice(undeclared_utf8_page().as_bytes());
            conn.send(200, &[("Content-Type", "text/html")], &body)
                .await
        }
        "/charset/utf16-bom" => {
            let mut body = vec![0xFF, 0xFE];
            for unit in undeclared_utf8_page().encode_utf16() {
                body.extend_from_slice(&unit.to_le_bytes());
            }
            conn.send(200, &[("Content-Type", "text/html")], &body)
                .await
        }
        "/charset/bogus" => {
            conn.send(
                200,
                &[("Content-Type", "text/html; charset=x-no-such-charset")],
                undeclared_utf8_page().as_bytes(),
            )
            .await
        }
        _ => return None,
    };
    Some(done)
}

/// The text every `/charset/*` page decodes to, except `/charset/sjis-meta`.
pub const CHARSET_TEXT: &str = "café résumé";

/// The text `/charset/sjis-meta` decodes to.
pub const CHARSET_TEXT_JA: &str = "日本語のテキスト";

/// "café résumé" in ISO-8859-1.
const LATIN1_TEXT: &[u8] = b"caf\xe9 r\xe9sum\xe9";

/// "日本語のテキスト" in Shift_JIS.
const SJIS_TEXT: &[u8] = b"\x93\xfa\x96\x7b\x8c\xea\x82\xcc\x83\x65\x83\x4c\x83\x58\x83\x67";

fn latin1_page(with_meta: bool) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"<!DOCTYPE html><html><head>");
    if with_meta {
        out.extend_from_slice(b"<meta charset=\"iso-8859-1\">");
    }
    out.extend_from_slice(b"<title>Latin-1</title></head><body><p>");
    out.extend_from_slice(LATIN1_TEXT);
    out.extend_from_slice(b"</p></body></html>\n");
    out
}

fn sjis_page() -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(
        b"<!DOCTYPE html><html lang=\"ja\"><head>\
          <meta http-equiv=\"Content-Type\" content=\"text/html; charset=Shift_JIS\">\
          <title>Shift_JIS</title></head><body><p>",
    );
    out.extend_from_slice(SJIS_TEXT);
    out.extend_from_slice(b"</p></body></html>\n");
    out
}

/// A UTF-8 page with no charset declaration in its markup.
fn undeclared_utf8_page() -> String {
    format!(
        "<!DOCTYPE html><html><head><title>Text</title></head><body><p>{CHARSET_TEXT}</p></body></html>\n"
    )
}
