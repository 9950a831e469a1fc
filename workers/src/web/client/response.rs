//! The response as callers get it: status, headers and the whole decoded body, read within
//! the byte limit (counted after decompression, so a compression bomb stops at the limit).
//! An error response's body (status 400 and above) is only read up to
//! [`ERROR_BODY_MAX_BYTES`], and cut there: the status is the
//! answer, the body only its detail. An HTML page over the limit is kept, not failed: from
//! there on it is reduced as it streams (`reduce`: scripts, styles, SVG, comments dropped),
//! the decoded bytes read are capped by `http.max_decoded_bytes`, and what is kept is cut at
//! the limit when it is still over ([`Reduced`] says what happened).
//!
//! Not here: what the body means (`web::extract`, `fetch`).

use std::net::SocketAddr;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use reqwest::header::{self, HeaderMap};
use url::Url;

use super::reduce::Reducer;
use super::{Client, ERROR_BODY_MAX_BYTES, Error};

/// A response whose body has been read whole within the limits.
#[derive(Debug, Clone)]
pub struct Response {
    /// The URL after redirects.
    pub final_url: Url,
    /// The HTTP status of the final response.
    pub status: u16,
    /// The final response's headers.
    pub headers: HeaderMap,
    /// The decoded body (content-encoding removed).
    pub body: Bytes,
    /// The address the final response came from.
    pub remote_addr: Option<SocketAddr>,
    /// Every URL requested, the first one included, in order.
    pub hops: Vec<Url>,
    /// Set when the body was an HTML page over the byte limit: `body` is what was kept.
    pub reduced: Option<Reduced>,
}

/// What reading an oversize HTML page did to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reduced {
    /// Bytes of scripts, styles, SVG and comments dropped.
    pub dropped: u64,
    /// Whether what was kept was still over the limit, so the page was cut there and the
    /// rest of it not read.
    pub truncated: bool,
    /// The byte limit.
    pub limit: u64,
}

impl Reduced {
    /// The warning a result carries about it.
    pub fn warning(&self) -> String {
        let dropped = format!(
            "the page is over {} bytes: {} bytes of scripts, styles, SVG and comments dropped",
            self.limit, self.dropped
        );
        if self.truncated {
            format!(
                "{dropped}; the rest still over the limit, cut at {} bytes (truncated)",
                self.limit
            )
        } else {
            dropped
        }
    }
}

impl Response {
    /// Returns the Content-Type header value, if any and valid UTF-8.
    pub fn content_type(&self) -> Option<&str> {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
    }

    /// Returns a header value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

impl Client {
    /// Reads the body of the final response within `limit` and assembles the [`Response`]:
    /// a successful body over the limit as `over` says ([`Over::Reduce`] only when it is
    /// HTML, refused otherwise), an error body cut.
    pub(super) async fn finish(
        &self,
        response: reqwest::Response,
        final_url: Url,
        hops: Vec<Url>,
        limit: u64,
        over: Over,
    ) -> Result<Response, Error> {
        let status = response.status().as_u16();
        let remote_addr = response.remote_addr();
        let headers = response.headers().clone();
        let over = match over {
            _ if status >= 400 => Over::Cut,
            Over::Reduce { .. } if !reducible(&headers) => Over::Refuse,
            over => over,
        };
        let limit = if over == Over::Cut {
            limit.min(ERROR_BODY_MAX_BYTES)
        } else {
            limit
        };
        let (body, reduced) = self.read_body(response, limit, over).await?;
        Ok(Response {
            final_url,
            status,
            headers,
            body,
            remote_addr,
            hops,
            reduced,
        })
    }

    /// Reads the whole body within `limit` bytes, counted after decompression (a declared
    /// length over the limit is refused before reading, unless the body is encoded); with
    /// [`Over::Cut`], the first `limit` bytes are kept instead and the rest is not read; with
    /// [`Over::Reduce`], the page is reduced from the moment it passes the limit.
    async fn read_body(
        &self,
        mut response: reqwest::Response,
        limit: u64,
        over: Over,
    ) -> Result<(Bytes, Option<Reduced>), Error> {
        let encoded = response.headers().contains_key(header::CONTENT_ENCODING);
        let refused_over = match over {
            Over::Refuse => Some(limit),
            Over::Reduce { cap } => Some(cap),
            Over::Cut => None,
        };
        if let Some(refused_over) = refused_over
            && !encoded
            && response
                .content_length()
                .is_some_and(|length| length > refused_over)
        {
            return Err(Error::TooLarge {
                limit: refused_over,
            });
        }
        let url = response.url().clone();
        let mut body = BytesMut::new();
        let mut reducer: Option<Reducer> = None;
        let started = Instant::now();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if let Some(reducer) = reducer.as_mut() {
                        reducer.write(&chunk);
                        if let Over::Reduce { cap } = over
                            && reducer.written() > cap
                        {
                            return Err(Error::TooLarge { limit: cap });
                        }
                        if reducer.kept_len() > limit {
                            break;
                        }
                        continue;
                    }
                    // Counted after decompression: reqwest decodes the stream as it reads.
                    if (body.len() + chunk.len()) as u64 > limit {
                        match over {
                            Over::Refuse => return Err(Error::TooLarge { limit }),
                            Over::Cut => {
                                let room = limit as usize - body.len();
                                body.extend_from_slice(&chunk[..room]);
                                break;
                            }
                            Over::Reduce { .. } if !looks_like_markup(&body, &chunk) => {
                                return Err(Error::TooLarge { limit });
                            }
                            Over::Reduce { .. } => {
                                let mut started = Reducer::new();
                                started.write(&std::mem::take(&mut body));
                                started.write(&chunk);
                                let over_already = started.kept_len() > limit;
                                reducer = Some(started);
                                if over_already {
                                    break;
                                }
                                continue;
                            }
                        }
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::debug!(
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "body read failed"
                    );
                    return Err(self.classify(&url, error));
                }
            }
        }
        let Some(reducer) = reducer else {
            return Ok((body.freeze(), None));
        };
        let (mut kept, read) = reducer.finish();
        let kept_all = kept.len() as u64;
        let truncated = kept_all > limit;
        if truncated {
            kept.truncate(limit as usize);
        }
        let reduced = Reduced {
            dropped: read.saturating_sub(kept_all),
            truncated,
            limit,
        };
        Ok((Bytes::from(kept), Some(reduced)))
    }
}

/// Whether a successful response is an HTML page that may be reduced instead of refused when
/// it is over the limit: labelled HTML or not labelled at all (the fetch sniffs it), in an
/// encoding lol_html can read byte by byte (not UTF-16).
fn reducible(headers: &HeaderMap) -> bool {
    let Some(label) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
    else {
        return true;
    };
    let label = label.to_ascii_lowercase();
    let essence = label.split(';').next().unwrap_or_default().trim();
    matches!(essence, "text/html" | "application/xhtml+xml" | "") && !label.contains("utf-16")
}

/// Whether the start of a body over the limit is markup worth reducing: a `<` in its first
/// KiB and no NUL byte (a compression bomb of zeros, or binary data labelled HTML, is
/// refused as before).
fn looks_like_markup(body: &[u8], chunk: &[u8]) -> bool {
    let head = if body.is_empty() { chunk } else { body };
    let head = &head[..head.len().min(1024)];
    head.contains(&b'<') && !head.contains(&0)
}

/// What reading a body does with bytes past its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Over {
    /// Fails with [`Error::TooLarge`] (API answers, webhooks' responses, non-HTML bodies).
    Refuse,
    /// Keeps the first bytes and stops reading (error bodies).
    Cut,
    /// Reduces the page from there on (an HTML page), failing with [`Error::TooLarge`] past
    /// `cap` decoded bytes read, and keeps the first `limit` bytes of what is left.
    Reduce {
        /// The hard cap on decoded bytes read.
        cap: u64,
    },
}
