//! The labelled extraction set (`../shared/extraction-bench/scrapinghub-aeb`): its pages,
//! decoded as trawl decodes a response, for the extraction and archive benchmarks. The pages
//! are read from the shared folder, never copied into the project.

use std::io::Read as _;
use std::path::Path;

use trawl_workers::web::charset;

/// One page of the labelled set.
pub(crate) struct Page {
    /// Its id in `ground-truth.json`.
    pub(crate) id: String,
    /// The URL it was captured from.
    pub(crate) url: url::Url,
    /// The HTML, decoded.
    pub(crate) html: String,
}

/// Every page of the set in `set`, sorted by id.
pub(crate) fn load(set: &Path) -> Vec<Page> {
    let truth: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(set.join("ground-truth.json")).expect("ground truth readable"),
    )
    .expect("ground truth is json");
    let mut pages = Vec::new();
    for (id, entry) in truth.as_object().expect("an object of pages") {
        let url = entry["url"]
            .as_str()
            .and_then(|url| url::Url::parse(url).ok())
            .unwrap_or_else(|| url::Url::parse("http://localhost/").expect("valid"));
        let file = std::fs::File::open(set.join("html").join(format!("{id}.html.gz")))
            .expect("page readable");
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(file)
            .read_to_end(&mut bytes)
            .expect("page decompresses");
        let html = charset::decode(&bytes, None, true).text;
        pages.push(Page {
            id: id.clone(),
            url,
            html,
        });
    }
    pages.sort_by(|a, b| a.id.cmp(&b.id));
    pages
}
