//! The web toolbox: the SSRF-guarded client and everything between response bytes and clean
//! text. `client`: URL in, bounded response out, every hop and every address checked. `ssrf`:
//! the destination policy. `dns`: resolution behind the policy. `proxy`: the configured
//! outbound proxies and how a request picks one (a job's own choice is the contract's,
//! re-exported). `charset`: bytes to text. `budget`: what parsing an HTML document would cost,
//! measured before the tree is built. `noscript`: `<noscript>` markup ended where a browser
//! running scripts ends it, before the tree is built. `scripts`: the bodies of scripts and
//! style sheets cut before extraction parses a page. `extract`: HTML to main content, links and
//! metadata, by an extractor chosen for the page's type (`page_type`: JSON-LD, `og:type`, the
//! URL). `thread`: a thread's posts from their schema.org microdata.
//! `blocks`: one element written as text or markdown, and the runs of four words said so far.
//! `select`: a page reduced to the elements CSS selectors name, before extraction.
//! `prune`: boilerplate rules around Readability. `lines`: a page's visible text, one line per
//! block (for the archive's page documents). `code_lang`: code blocks' languages for markdown
//! fences. `blockpage`: walls, challenges and shells. `lang`: the language of a page that does
//! not declare it. `pdf`: PDF to text. `normalize`: URL normalisation. `json`: services' JSON
//! answers read strictly on types (search and fallback extraction providers).
//!
//! Not here: running jobs, retries or storage; this module knows nothing of queues. It uses
//! the contract's error codes and output types (`crate::job`) and nothing else of the crate.

pub mod blockpage;
pub(crate) mod blocks;
pub mod budget;
pub mod charset;
pub mod client;
pub mod code_lang;
pub mod dns;
pub mod extract;
pub(crate) mod json;
pub mod lang;
pub mod lines;
pub mod normalize;
pub mod noscript;
pub mod page_type;
pub mod pdf;
pub mod proxy;
pub mod prune;
pub mod scripts;
pub mod select;
pub mod ssrf;
pub(crate) mod thread;

pub use client::{Client, Config, Response};
pub use dns::{Dns, StaticDns};
pub use ssrf::Policy;
