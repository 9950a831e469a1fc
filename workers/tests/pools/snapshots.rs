//! Extraction snapshots: the markdown and text trawl produces for fixed pages (the bundled
//! example site, and the fixture server's generated article and site pages), kept under
//! `tests/pools/snapshots/` with insta, so any change in extraction shows as a diff to review
//! (`cargo insta review`, or `INSTA_UPDATE=always` to accept).

use testkit::{article_page, site_page};
use trawl_workers::job::Format;
use trawl_workers::web::extract::extract_html;

fn extract(html: &str, url: &str, format: Format) -> String {
    let url = url::Url::parse(url).expect("url");
    let extracted = extract_html(html, &url, format).expect("extracts");
    format!(
        "title: {:?}\nextractor: {:?}\nwarning: {:?}\nmeta: {:?}\noutline: {:?}\nlinks: {}\n---\n{}",
        extracted.title,
        extracted.extractor,
        extracted.warning,
        extracted.meta,
        extracted
            .outline
            .iter()
            .map(|heading| format!("{} {}", "#".repeat(heading.level as usize), heading.text))
            .collect::<Vec<_>>(),
        extracted.links.len(),
        extracted.text
    )
}

fn example(name: &str) -> String {
    let path = format!(
        "{}/../examples/site/articles/{name}.html",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).expect("the bundled example page")
}

#[test]
fn example_articles_as_markdown() {
    for name in ["tidal-power", "sourdough", "lighthouses"] {
        let url = format!("http://127.0.0.1:8719/articles/{name}.html");
        insta::assert_snapshot!(
            format!("example_{name}_markdown"),
            extract(&example(name), &url, Format::Markdown)
        );
    }
}

#[test]
fn example_article_as_text() {
    let url = "http://127.0.0.1:8719/articles/sourdough.html";
    insta::assert_snapshot!(
        "example_sourdough_text",
        extract(&example("sourdough"), url, Format::Text)
    );
}

#[test]
fn generated_pages_as_markdown() {
    let base = "http://site.test";
    insta::assert_snapshot!(
        "fixture_article_1",
        extract(
            &article_page(1, base),
            "http://site.test/article/1",
            Format::Markdown
        )
    );
    insta::assert_snapshot!(
        "fixture_site_3",
        extract(&site_page(3), "http://site.test/site/3", Format::Markdown)
    );
}
