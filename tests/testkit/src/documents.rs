//! The binary documents the fixture serves: a real 16×16 PNG, a well-formed two-page PDF,
//! and garbage labelled as a PDF. Built by code the first time a route asks for them, then
//! shared by every server in the process.
//!
//! They are small and exist to exercise content-type handling and PDF extraction; they are
//! not images or PDFs anyone would look at. The compression bombs live in `bombs`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::OnceLock;

/// The body of `/image.png` (and of `/ctype/png-as-html`).
pub(crate) fn png() -> &'static [u8] {
    static PNG: OnceLock<Vec<u8>> = OnceLock::new();
    PNG.get_or_init(build_png)
}

/// The body of `/pdf/ok`.
pub(crate) fn pdf() -> &'static [u8] {
    static PDF: OnceLock<Vec<u8>> = OnceLock::new();
    PDF.get_or_init(build_pdf)
}

/// The body of `/pdf/broken`: 2 KiB of scrambled bytes that do not start with `%PDF`.
pub(crate) fn broken_pdf() -> Vec<u8> {
    (0..2048u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let mut crc = flate2::Crc::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc.sum().to_be_bytes());
}

/// A valid 16×16 RGB PNG (a colour gradient).
fn build_png() -> Vec<u8> {
    const SIDE: u32 = 16;
    let mut raw = Vec::new();
    for y in 0..SIDE {
        raw.push(0); // filter: none
        for x in 0..SIDE {
            raw.extend_from_slice(&[(x * 16) as u8, (y * 16) as u8, 128]);
        }
    }
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&raw).expect("writing to a Vec cannot fail");
    let idat = enc.finish().expect("writing to a Vec cannot fail");
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&SIDE.to_be_bytes());
    ihdr.extend_from_slice(&SIDE.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB, deflate, no filter set, no interlace
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    png_chunk(&mut out, b"IHDR", &ihdr);
    png_chunk(&mut out, b"IDAT", &idat);
    png_chunk(&mut out, b"IEND", &[]);
    out
}

/// A minimal two-page PDF 1.4 with Helvetica text "Page one text" and
/// "Page two text", an info dictionary and a correct cross-reference table.
fn build_pdf() -> Vec<u8> {
    fn content(text: &str) -> String {
        let stream = format!("BT /F1 24 Tf 72 720 Td ({text}) Tj ET");
        format!(
            "<< /Length {} >>\nstream\n{stream}\nendstream",
            stream.len()
        )
    }
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R 5 0 R] /Count 2 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 7 0 R >> >> /Contents 4 0 R >>"
            .to_string(),
        content("Page one text"),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 7 0 R >> >> /Contents 6 0 R >>"
            .to_string(),
        content("Page two text"),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_string(),
        "<< /Title (Fixture PDF) /Author (trawl fixture) /Producer (trawl testing) >>".to_string(),
    ];
    let mut out: Vec<u8> = b"%PDF-1.4\n%\xE2\xE3\xCF\xD3\n".to_vec();
    let mut offsets = Vec::with_capacity(objects.len());
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    let mut table = format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1);
    for off in offsets {
        let _ = writeln!(table, "{off:010} 00000 n ");
    }
    let _ = write!(
        table,
        "trailer\n<< /Size {} /Root 1 0 R /Info 8 0 R >>\nstartxref\n{xref}\n%%EOF\n",
        objects.len() + 1
    );
    out.extend_from_slice(table.as_bytes());
    out
}
