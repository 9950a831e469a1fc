//! What kind of page a document is (article, forum thread, product, collection, listing,
//! documentation, service page), from cheap signals read off the tree trawl parsed anyway
//! (`web::extract` gathers them in its one pass over the head's elements): schema.org types
//! in JSON-LD (and how many products it describes: one is a product page, several a category
//! or a comparison), Open Graph's `og:type`, and the URL's shape (rs-trafilatura's URL
//! patterns, a store's host weighing less than its path).
//! `web::extract` picks its extractor by it, and the result reports it as `meta.page_type`.
//!
//! Not here: extraction itself (`web::extract`), or a trained classifier (too slow for every
//! page; a page with no signal is an article, the common case).

use rs_trafilatura::page_type::{PageType as Profile, classify_url};
use url::Url;

use crate::job::PageType;

/// Most JSON-LD bytes read per page (some pages inline megabytes of product data).
const MAX_JSON_LD_BYTES: usize = 512 * 1024;

/// schema.org's types for one product.
const PRODUCT_TYPES: [&str; 4] = [
    "Product",
    "ProductGroup",
    "IndividualProduct",
    "ProductModel",
];

/// Products described in a page's JSON-LD from which it is about several, not one: a shop's
/// category page lists them (often as an `ItemList`), a review roundup compares them. A product
/// page describes its own product once (its variants sit inside it, under `hasVariant`; related
/// products it lists beside it do not count against it).
const SEVERAL_PRODUCTS: usize = 3;

/// Items of a product type in a page's JSON-LD.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Products {
    /// Described for themselves (top level, `@graph`, `mainEntity`).
    own: usize,
    /// Inside an `ItemList`'s `itemListElement`.
    listed: usize,
}

/// What a page's own markup says it is.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Signals {
    /// schema.org `@type`s of its JSON-LD (`@graph` members and nested items included).
    pub ld_types: Vec<String>,
    /// Open Graph's `og:type`, lowercased.
    pub og_type: Option<String>,
    /// Items of a product type in its JSON-LD, each counted (`ld_types` names a type once):
    /// outside any item list, and within one.
    products: Products,
    /// JSON-LD bytes read so far.
    json_ld_bytes: usize,
}

impl Signals {
    /// Adds the `@type`s of one JSON-LD block (broken JSON is no signal); blocks past
    /// 512 KiB in all are skipped. Returns the block as parsed, for what else the caller
    /// reads from it.
    pub fn add_json_ld(&mut self, text: &str) -> Option<serde_json::Value> {
        if self.json_ld_bytes + text.len() > MAX_JSON_LD_BYTES {
            return None;
        }
        self.json_ld_bytes += text.len();
        let value = serde_json::from_str::<serde_json::Value>(text).ok()?;
        collect_types(&value, &mut self.ld_types, &mut self.products, false, 0);
        Some(value)
    }

    /// Whether the page says it is an article (`og:type` `article`), whatever its layout.
    pub fn declares_article(&self) -> bool {
        self.og_type.as_deref() == Some("article")
    }

    fn has_type(&self, names: &[&str]) -> bool {
        self.ld_types
            .iter()
            .any(|found| names.iter().any(|name| found.eq_ignore_ascii_case(name)))
    }
}

/// The page type of a document at `url` with these signals. Structured data the site wrote
/// for search engines comes first (it names what the page is about), then the URL's shape,
/// then `og:type`; a page with no signal is an article.
pub fn classify(signals: &Signals, url: &Url) -> PageType {
    // A `Question` is a thread's opening post, unless it is one of an `FAQPage`'s questions:
    // the FAQ block of an article, a product or a service page says nothing of the page.
    if signals.has_type(&["DiscussionForumPosting", "QAPage"])
        || (signals.has_type(&["Question"]) && !signals.has_type(&["FAQPage"]))
    {
        return PageType::Forum;
    }
    if signals.has_type(&["CollectionPage", "OfferCatalog", "SearchResultsPage"]) {
        return PageType::Collection;
    }
    let article_ld = signals.has_type(&[
        "Article",
        "NewsArticle",
        "BlogPosting",
        "Report",
        "ScholarlyArticle",
        "LiveBlogPosting",
    ]);
    let products = &signals.products;
    if products.own != 1 && products.own + products.listed >= SEVERAL_PRODUCTS {
        // Several products: a category page, or an article comparing them (its own type says
        // so, and the rules below read it as the article it is).
        if !article_ld {
            return PageType::Collection;
        }
    } else if signals.has_type(&PRODUCT_TYPES) {
        return PageType::Product;
    }
    let by_url = Some(from_profile(classify_url(url.as_str())))
        .filter(|page_type| *page_type != PageType::Article)
        .map(|by_url| product_url_by_its_path(by_url, url));
    if let Some(by_url) = by_url
        && !(article_ld && matches!(by_url, PageType::Listing | PageType::Service))
    {
        return by_url;
    }
    if signals.has_type(&["TechArticle", "APIReference", "SoftwareSourceCode"]) {
        return PageType::Documentation;
    }
    if let Some(og) = signals.og_type.as_deref()
        && og.starts_with("product")
    {
        // Open Graph's `product.group` (also written `product:group`) is a group of products.
        return if og.ends_with("group") {
            PageType::Collection
        } else {
            PageType::Product
        };
    }
    PageType::Article
}

/// A URL read as a product's only because of its host (`shop.`, `store.`) is whatever its path
/// says when the path says something: a store's `/collections/socks` is a collection.
fn product_url_by_its_path(by_url: PageType, url: &Url) -> PageType {
    if by_url != PageType::Product {
        return by_url;
    }
    let mut path_only = String::from("http://host.invalid");
    path_only.push_str(url.path());
    match from_profile(classify_url(&path_only)) {
        PageType::Article => PageType::Product,
        by_path => by_path,
    }
}

/// rs-trafilatura's extraction profile for a page type.
pub fn profile(page_type: PageType) -> Profile {
    match page_type {
        PageType::Article => Profile::Article,
        PageType::Forum => Profile::Forum,
        PageType::Product => Profile::Product,
        PageType::Collection => Profile::Category,
        PageType::Listing => Profile::Listing,
        PageType::Documentation => Profile::Documentation,
        PageType::Service => Profile::Service,
    }
}

/// The page type of one of rs-trafilatura's profiles.
pub fn from_profile(profile: Profile) -> PageType {
    match profile {
        Profile::Article => PageType::Article,
        Profile::Forum => PageType::Forum,
        Profile::Product => PageType::Product,
        Profile::Category => PageType::Collection,
        Profile::Listing => PageType::Listing,
        Profile::Documentation => PageType::Documentation,
        Profile::Service => PageType::Service,
    }
}

/// Adds the `@type`s of a JSON-LD value and of what it holds (a few levels deep), and counts
/// the items of a product type in `products` (`listed`: `value` is in an item list).
fn collect_types(
    value: &serde_json::Value,
    types: &mut Vec<String>,
    products: &mut Products,
    listed: bool,
    depth: usize,
) {
    if depth > 6 || types.len() > 64 {
        return;
    }
    match value {
        serde_json::Value::Array(items) => {
            for item in items {
                collect_types(item, types, products, listed, depth + 1);
            }
        }
        serde_json::Value::Object(object) => {
            let names = match object.get("@type") {
                Some(name @ serde_json::Value::String(_)) => std::slice::from_ref(name),
                Some(serde_json::Value::Array(names)) => names.as_slice(),
                _ => &[],
            };
            let mut product = false;
            for name in names
                .iter()
                .filter_map(serde_json::Value::as_str)
                .filter_map(type_name)
            {
                product |= PRODUCT_TYPES
                    .iter()
                    .any(|known| known.eq_ignore_ascii_case(name));
                if !types.iter().any(|known| known == name) {
                    types.push(name.to_owned());
                }
            }
            if product {
                if listed {
                    products.listed += 1;
                } else {
                    products.own += 1;
                }
            }
            for key in ["@graph", "mainEntity", "itemListElement"] {
                if let Some(inner) = object.get(key) {
                    let listed = listed || key == "itemListElement";
                    collect_types(inner, types, products, listed, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// A type's name without its vocabulary: `https://schema.org/Product` and `schema:Product`
/// are `Product`; an empty name is none.
fn type_name(name: &str) -> Option<&str> {
    let name = name.rsplit(['/', ':', '#']).next().unwrap_or(name).trim();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page type `web::extract` reports for a page with this head at `url`.
    fn page_type(head: &str, url: &str) -> PageType {
        let html = format!("<html><head>{head}</head><body><p>x</p></body></html>");
        let url = Url::parse(url).expect("url");
        crate::web::extract::extract_html(&html, &url, crate::job::Format::Text)
            .expect("extracts")
            .meta
            .page_type
            .expect("a page type")
    }

    #[test]
    fn profiles_map_both_ways() {
        for page_type in PageType::ALL {
            assert_eq!(from_profile(profile(page_type)), page_type);
            assert_eq!(profile(page_type).as_str(), page_type.as_str());
        }
    }

    #[test]
    fn structured_data_names_the_page() {
        let ld = |json: &str| format!(r#"<script type="application/ld+json">{json}</script>"#);
        assert_eq!(
            page_type(
                &ld(r#"{"@context":"https://schema.org","@type":"Product","name":"Kettle"}"#),
                "https://shop.test/kettle"
            ),
            PageType::Product
        );
        assert_eq!(
            page_type(
                &ld(r#"{"@graph":[{"@type":"WebSite"},{"@type":["DiscussionForumPosting"]}]}"#),
                "https://talk.test/x"
            ),
            PageType::Forum
        );
        assert_eq!(
            page_type(
                &ld(r#"{"@type":"schema:CollectionPage"}"#),
                "https://shop.test/kettles"
            ),
            PageType::Collection
        );
        // Broken JSON-LD is no signal.
        assert_eq!(
            page_type(&ld("{\"@type\": "), "https://news.test/story"),
            PageType::Article
        );
    }

    #[test]
    fn faq_questions_do_not_make_a_forum() {
        let ld = |json: &str| format!(r#"<script type="application/ld+json">{json}</script>"#);
        let faq = r#"{"@type":"FAQPage","mainEntity":[{"@type":"Question","name":"How long?"}]}"#;
        // An article with an FAQ block is an article, a product with one a product.
        assert_eq!(
            page_type(
                &format!("{}{}", ld(r#"{"@type":"BlogPosting"}"#), ld(faq)),
                "https://example.test/2024/05/a-story"
            ),
            PageType::Article
        );
        assert_eq!(
            page_type(
                &format!(
                    "{}{}",
                    ld(faq),
                    ld(r#"{"@type":"Product","name":"Kettle"}"#)
                ),
                "https://example.test/kettle"
            ),
            PageType::Product
        );
        // A question on its own, or a QAPage's, is a thread.
        assert_eq!(
            page_type(
                &ld(r#"{"@type":"Question","name":"Kettle descaling?"}"#),
                "https://example.test/kettle"
            ),
            PageType::Forum
        );
        assert_eq!(
            page_type(
                &ld(r#"{"@type":"QAPage","mainEntity":{"@type":"Question"}}"#),
                "https://example.test/kettle"
            ),
            PageType::Forum
        );
    }

    #[test]
    fn several_products_make_a_collection_or_an_article_comparing_them() {
        let ld = |json: &str| format!(r#"<script type="application/ld+json">{json}</script>"#);
        let product = |name: &str| format!(r#"{{"@type":"Product","name":"{name}"}}"#);
        let three = format!(
            "[{},{},{}]",
            product("Kettle"),
            product("Toaster"),
            product("Mixer")
        );
        assert_eq!(
            page_type(&ld(&three), "https://example.test/kitchen"),
            PageType::Collection
        );
        let item_list = format!(r#"{{"@type":"ItemList","itemListElement":{three}}}"#);
        assert_eq!(
            page_type(&ld(&item_list), "https://example.test/kitchen"),
            PageType::Collection
        );
        // A review roundup says it is an article.
        assert_eq!(
            page_type(
                &format!("{}{}", ld(r#"{"@type":"NewsArticle"}"#), ld(&three)),
                "https://example.test/best-kettles"
            ),
            PageType::Article
        );
        // A product page listing related products beside its own is a product page.
        let related = r#"{"@type":"Product","name":"Kettle"}"#;
        assert_eq!(
            page_type(
                &format!("{}{}", ld(related), ld(&item_list)),
                "https://example.test/kettle"
            ),
            PageType::Product
        );
        // One product, with its variants inside it, is a product page.
        let group = r#"{"@type":"ProductGroup","name":"Kettle",
            "hasVariant":[{"@type":"Product"},{"@type":"Product"},{"@type":"Product"}]}"#;
        assert_eq!(
            page_type(&ld(group), "https://example.test/kettle"),
            PageType::Product
        );
    }

    #[test]
    fn a_store_host_does_not_outweigh_the_path() {
        assert_eq!(
            page_type("", "https://shop.example.test/collections/socks"),
            PageType::Collection
        );
        assert_eq!(
            page_type(
                "",
                "https://shop.example.test/collections/socks/products/wool"
            ),
            PageType::Product
        );
        assert_eq!(
            page_type("", "https://shop.example.test/wool-socks"),
            PageType::Product
        );
        assert_eq!(
            page_type("", "https://example.test/products/wool-socks"),
            PageType::Product
        );
    }

    #[test]
    fn the_url_and_og_type_speak_when_structured_data_is_silent() {
        assert_eq!(
            page_type("", "https://community.test/t/upgrade-help/42"),
            PageType::Forum
        );
        assert_eq!(
            page_type("", "https://example.test/docs/install/"),
            PageType::Documentation
        );
        assert_eq!(
            page_type(
                r#"<meta property="og:type" content="product.item">"#,
                "https://example.test/kettle"
            ),
            PageType::Product
        );
        assert_eq!(
            page_type(
                r#"<meta property="og:type" content="product.group">"#,
                "https://example.test/kettles"
            ),
            PageType::Collection
        );
        assert_eq!(
            page_type("", "https://example.test/2024/05/a-story"),
            PageType::Article
        );
    }
}
