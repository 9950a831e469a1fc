//! Turns response bytes into text: the encoding comes from the byte-order mark, then the
//! Content-Type charset, then a `<meta>` declaration in the first 1,024 bytes (the HTML
//! prescan), then UTF-8. Decoding itself is encoding_rs (the WHATWG Encoding Standard).
//!
//! Not here: guessing encodings from byte statistics; undeclared non-UTF-8 pages decode with
//! replacement characters, as browsers in a UTF-8 locale would.

use encoding_rs::{Encoding, UTF_8};

/// Text decoded from a body, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The text.
    pub text: String,
    /// The WHATWG name of the encoding used.
    pub encoding: &'static str,
    /// Set when a declared charset was unknown or bytes had to be replaced.
    pub warning: Option<String>,
}

/// Decodes `body` given the response's Content-Type; `sniff_meta` enables the HTML prescan.
pub fn decode(body: &[u8], content_type: Option<&str>, sniff_meta: bool) -> Decoded {
    let mut warning = None;
    let declared = content_type.and_then(charset_parameter);
    let from_header = declared.as_deref().and_then(|label| {
        let found = Encoding::for_label(label.as_bytes());
        if found.is_none() {
            warning = Some(format!(
                "unknown charset {label:?} in content-type, ignored"
            ));
        }
        found
    });
    let encoding = Encoding::for_bom(body)
        .map(|(encoding, _)| encoding)
        .or(from_header)
        .or_else(|| if sniff_meta { prescan_meta(body) } else { None })
        .unwrap_or(UTF_8);
    // `decode` strips a BOM of the chosen encoding and replaces malformed sequences.
    let (text, used, had_errors) = encoding.decode(body);
    if had_errors && warning.is_none() {
        warning = Some(format!("malformed {} bytes replaced", used.name()));
    }
    Decoded {
        text: text.into_owned(),
        encoding: used.name(),
        warning,
    }
}

/// Returns the `charset` parameter of a Content-Type value, unquoted.
fn charset_parameter(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|parameter| {
        let (name, value) = parameter.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches(['"', '\'']).trim().to_owned())
            .filter(|value| !value.is_empty())
    })
}

/// The HTML prescan, simplified: looks for `<meta charset=…>` or a `content="…charset=…"`
/// attribute in the first 1,024 bytes. UTF-16 declarations are taken as UTF-8, as the
/// standard says (a real UTF-16 page has a BOM).
fn prescan_meta(body: &[u8]) -> Option<&'static Encoding> {
    let head = &body[..body.len().min(1024)];
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    let mut from = 0;
    while let Some(offset) = find(&lower[from..], b"<meta") {
        let start = from + offset;
        let end = lower[start..]
            .iter()
            .position(|&byte| byte == b'>')
            .map_or(lower.len(), |position| start + position);
        let tag = &lower[start..end];
        if let Some(position) = find(tag, b"charset") {
            let rest = &tag[position + b"charset".len()..];
            let rest = trim_start(rest);
            if let Some(rest) = rest.strip_prefix(b"=") {
                let value: Vec<u8> = trim_start(rest)
                    .iter()
                    .copied()
                    .skip_while(|&byte| byte == b'"' || byte == b'\'')
                    .take_while(|&byte| !matches!(byte, b'"' | b'\'' | b';' | b' ' | b'/' | b'>'))
                    .collect();
                if let Some(encoding) = Encoding::for_label(&value) {
                    if encoding == encoding_rs::UTF_16LE || encoding == encoding_rs::UTF_16BE {
                        return Some(UTF_8);
                    }
                    return Some(encoding);
                }
            }
        }
        from = end.max(start + 1);
        if from >= lower.len() {
            break;
        }
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take_while(|byte| byte.is_ascii_whitespace())
        .count();
    &bytes[skip..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_charset_wins_over_meta_and_bom_wins_over_both() {
        let latin1 = b"<meta charset=utf-8>caf\xe9";
        let decoded = decode(latin1, Some("text/html; charset=ISO-8859-1"), true);
        assert_eq!(decoded.encoding, "windows-1252");
        assert!(decoded.text.ends_with("café"));

        let bom = b"\xef\xbb\xbfcaf\xc3\xa9";
        let decoded = decode(bom, Some("text/html; charset=latin1"), true);
        assert_eq!(decoded.text, "café");
        assert_eq!(decoded.encoding, "UTF-8");
    }

    #[test]
    fn meta_declarations_are_found_in_both_forms() {
        let html = b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=Shift_JIS\"></head>\x93\xfa\x96\x7b";
        let decoded = decode(html, Some("text/html"), true);
        assert_eq!(decoded.encoding, "Shift_JIS");
        assert!(decoded.text.ends_with("日本"));

        let html = b"<meta charset='iso-8859-15'>\xa4";
        assert_eq!(decode(html, None, true).text.chars().last(), Some('€'));
        assert_eq!(decode(html, None, false).encoding, "UTF-8");
    }

    #[test]
    fn unknown_charsets_fall_back_with_a_warning() {
        let decoded = decode(
            "héllo".as_bytes(),
            Some("text/html; charset=x-no-such"),
            true,
        );
        assert_eq!(decoded.text, "héllo");
        assert!(decoded.warning.expect("warning").contains("x-no-such"));
    }

    #[test]
    fn utf16_with_bom_decodes() {
        let body = [0xff, 0xfe, b'h', 0, b'i', 0];
        let decoded = decode(&body, None, true);
        assert_eq!(decoded.text, "hi");
        assert_eq!(decoded.encoding, "UTF-16LE");
    }
}
