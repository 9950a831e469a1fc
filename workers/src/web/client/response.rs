//! The response as callers get it: status, headers and the whole decoded body, read within
//! the byte limit (counted after decompression, so a compression bomb stops at the limit).
//! An error response's body (status 400 and above) is only read up to
//! [`ERROR_BODY_MAX_BYTES`], and cut there: the status is the
//! answer, the body only its detail.
//!
//! Not here: what the body means (`web::extract`, `fetch`).

use std::net::SocketAddr;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use reqwest::header::{self, HeaderMap};
use url::Url;

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
    /// Reads the body of the final response within `limit` and assembles the [`Response`].
    pub(super) async fn finish(
        &self,
        response: reqwest::Response,
        final_url: Url,
        hops: Vec<Url>,
        limit: u64,
    ) -> Result<Response, Error> {
        let status = response.status().as_u16();
        let remote_addr = response.remote_addr();
        let headers = response.headers().clone();
        let body = if status >= 400 {
            self.read_body(response, limit.min(ERROR_BODY_MAX_BYTES), Over::Cut)
                .await?
        } else {
            self.read_body(response, limit, Over::Refuse).await?
        };
        Ok(Response {
            final_url,
            status,
            headers,
            body,
            remote_addr,
            hops,
        })
    }

    /// Reads the whole body within `limit` bytes, counted after decompression (a declared
    /// length over the limit is refused before reading, unless the body is encoded); with
    /// [`Over::Cut`], the first `limit` bytes are kept instead and the rest is not read.
    async fn read_body(
        &self,
        mut response: reqwest::Response,
        limit: u64,
        over: Over,
    ) -> Result<Bytes, Error> {
        let encoded = response.headers().contains_key(header::CONTENT_ENCODING);
        if over == Over::Refuse
            && !encoded
            && response
                .content_length()
                .is_some_and(|length| length > limit)
        {
            return Err(Error::TooLarge { limit });
        }
        let url = response.url().clone();
        let mut body = BytesMut::new();
        let started = Instant::now();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    // Counted after decompression: reqwest decodes the stream as it reads.
                    if (body.len() + chunk.len()) as u64 > limit {
                        if over == Over::Refuse {
                            return Err(Error::TooLarge { limit });
                        }
                        let room = limit as usize - body.len();
                        body.extend_from_slice(&chunk[..room]);
                        break;
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
        Ok(body.freeze())
    }
}

/// What reading a body does with bytes past its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Over {
    /// Fails with [`Error::TooLarge`].
    Refuse,
    /// Keeps the first bytes and stops reading.
    Cut,
}
