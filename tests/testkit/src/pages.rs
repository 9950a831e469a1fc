//! The generated HTML pages: `/article/{n}` (a friendly article with the usual boilerplate
//! around it), the index `/` linking three of them, and `/site/{n}` (a million pages of
//! varied size linking each other, for pipeline benchmarks).
//!
//! Every page is a pure function of its number (and, for articles, the origin the canonical
//! link names), built from the `prose` generator; nothing is read from disk. Serving them is
//! the routes' business, not this module's.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::prose::{NOUNS, Rng, paragraph, sentence, title};

/// Number of pages served under `/site/{n}`: `n` ranges over `0..SITE_PAGES`.
pub const SITE_PAGES: u64 = 1_000_000;

const FIRST_NAMES: &[&str] = &[
    "Ada", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hugo",
];
const LAST_NAMES: &[&str] = &[
    "Marlow",
    "Okafor",
    "Lindqvist",
    "Tanaka",
    "Ferreira",
    "Novak",
    "Quinn",
    "Haddad",
];

fn article_seed(n: u64) -> u64 {
    n.wrapping_mul(0xA24B_AED4_963E_E407) ^ 0x0A27_1C1E
}

/// The `<h1>` (and `<title>` prefix) of `/article/{n}`.
pub fn article_title(n: u64) -> String {
    title(&mut Rng::new(article_seed(n)))
}

/// The author named in `/article/{n}` (`<meta name="author">` and byline).
pub fn article_author(n: u64) -> String {
    let mut rng = Rng::new(article_seed(n) ^ 0xA7);
    format!("{} {}", rng.pick(FIRST_NAMES), rng.pick(LAST_NAMES))
}

/// The HTML of `/article/{n}`: a friendly article page with the usual
/// boilerplate around it.
///
/// It has `<html lang="en">`, `<meta name="description">`,
/// `<meta name="author">` ([`article_author`]),
/// `<meta property="article:published_time">` (a date in 2024),
/// `<link rel="canonical" href="{base}/article/{n}">`, a cookie banner, a
/// header with nav, an `<article>` with an `<h1>` ([`article_title`]), a
/// byline, an intro paragraph and four `<h2>` sections (paragraphs, a `<ul>`,
/// a `<pre><code>` block containing `&lt;`/`&gt;` entities, a `<table>`), an
/// `<aside>` with "Related" links, and a footer. `base` is the scheme and
/// authority without a trailing slash, e.g. `http://127.0.0.1:8080`. Links
/// only point to `/`, `/article/1..=3` and `#fragments`. Deterministic in
/// `n` (and `base`).
pub fn article_page(n: u64, base: &str) -> String {
    let h1 = article_title(n);
    let author = article_author(n);
    let mut rng = Rng::new(article_seed(n) ^ 0x5EED);
    let month = rng.range(1, 12);
    let day = rng.range(1, 28);
    let date = format!("2024-{month:02}-{day:02}");
    let intro = paragraph(&mut rng);
    let description = sentence(&mut rng);
    let related: Vec<u64> = (1..=3).filter(|&m| m != n).take(2).collect();

    let mut s = String::with_capacity(8 * 1024);
    let _ = write!(
        s,
        r##"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{h1} | Fixture Gazette</title>
<meta name="description" content="{description}">
<meta name="author" content="{author}">
<meta property="og:title" content="{h1}">
<meta property="og:type" content="article">
<meta property="article:published_time" content="{date}T09:30:00Z">
<link rel="canonical" href="{base}/article/{n}">
<link rel="stylesheet" href="/static/site.css">
</head>
<body>
<div id="cookie-banner" class="cookie-banner" role="dialog" aria-label="Cookie consent">
<p>We use cookies to remember your reading preferences and to measure traffic. <a href="#cookie-policy">Cookie policy</a></p>
<button class="accept">Accept all</button> <button class="reject">Reject non-essential</button>
</div>
<header class="site-header">
<a class="logo" href="/">Fixture Gazette</a>
<nav class="main-nav"><ul><li><a href="/">Home</a></li><li><a href="/article/1">Latest</a></li><li><a href="/article/2">Features</a></li><li><a href="/article/3">Archive</a></li><li><a href="#subscribe">Subscribe</a></li></ul></nav>
</header>
<div class="layout">
<main id="main">
<article>
<h1>{h1}</h1>
<p class="byline">By <span class="author">{author}</span> · <time datetime="{date}">{date}</time></p>
<p class="lead">{intro}</p>
"##
    );
    // Section 1: paragraphs.
    let _ = writeln!(s, "<h2>{}</h2>", title(&mut rng));
    for _ in 0..2 {
        let _ = writeln!(s, "<p>{}</p>", paragraph(&mut rng));
    }
    // Section 2: a list.
    let _ = write!(
        s,
        "<h2>{}</h2>\n<p>{}</p>\n<ul>\n",
        title(&mut rng),
        paragraph(&mut rng)
    );
    for _ in 0..4 {
        let _ = writeln!(s, "<li>{}</li>", sentence(&mut rng));
    }
    s.push_str("</ul>\n");
    // Section 3: a code block.
    let var = rng.pick(NOUNS);
    let _ = write!(
        s,
        "<h2>{}</h2>\n<p>{}</p>\n<pre><code class=\"language-rust\">let {var}: Vec&lt;u64&gt; = (0..{n}).collect();\n\
         if {var}.len() &gt; 2 &amp;&amp; {var}[0] &lt; 1 {{\n    println!(\"{{}}\", {var}.len());\n}}\n</code></pre>\n",
        title(&mut rng),
        paragraph(&mut rng)
    );
    // Section 4: a table.
    let _ = write!(
        s,
        "<h2>{}</h2>\n<p>{}</p>\n<table>\n<thead><tr><th>Item</th><th>Count</th></tr></thead>\n<tbody>\n",
        title(&mut rng),
        paragraph(&mut rng)
    );
    for _ in 0..3 {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td></tr>",
            rng.pick(NOUNS),
            rng.range(1, 99)
        );
    }
    let _ = write!(
        s,
        "</tbody>\n</table>\n<p>{}</p>\n</article>\n</main>\n",
        paragraph(&mut rng)
    );
    s.push_str("<aside class=\"sidebar\">\n<h3>Related</h3>\n<ul>\n");
    for m in related {
        let _ = writeln!(
            s,
            "<li><a href=\"/article/{m}\">{}</a></li>",
            article_title(m)
        );
    }
    s.push_str(
        "</ul>\n<div class=\"ad\">Advertisement</div>\n</aside>\n</div>\n\
         <footer class=\"site-footer\">\n<p id=\"subscribe\">Subscribe to the Fixture Gazette newsletter.</p>\n\
         <p id=\"cookie-policy\">© 2024 Fixture Gazette. All rights reserved.</p>\n</footer>\n</body>\n</html>\n",
    );
    s
}

/// The HTML of `/`: the site's name and links to `/article/1..=3`, nothing else.
pub(crate) fn index_page() -> String {
    let mut s = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Fixture Gazette</title>\
         <meta name=\"description\" content=\"Index of the fixture site.\"></head>\n<body>\n\
         <h1>Fixture Gazette</h1>\n<ul>\n",
    );
    for n in 1..=3 {
        let _ = writeln!(
            s,
            "<li><a href=\"/article/{n}\">{}</a></li>",
            article_title(n)
        );
    }
    s.push_str("</ul>\n</body>\n</html>\n");
    s
}

/// The HTML of `/site/{n}`, for any `n` (the server only serves
/// `n < SITE_PAGES`).
///
/// Deterministic in `n`. The size lies between 5 KiB and 150,000 bytes
/// (about three pages in four are 5.5–60 KB, the rest 60–146 KB). The page
/// has a head with title, description and a relative canonical, header/nav
/// and footer boilerplate whose links are `#fragments` only, an `<article>`
/// with an `<h1>`, `<h2>` sections and paragraphs, and exactly five links to
/// other pages `/site/{m}` (`m != n`, distinct, `m < SITE_PAGES`).
///
/// To serve the same pages with a static server, write `site_page(n)` to
/// `{root}/site/{n}` and serve it as `text/html` (e.g. nginx `default_type
/// text/html;`).
pub fn site_page(n: u64) -> String {
    let mut rng = Rng::new(n.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ 0x517E);
    let target = if rng.range(0, 3) == 0 {
        rng.range(60_000, 145_000)
    } else {
        rng.range(5_500, 60_000)
    } as usize;
    let mut links: Vec<u64> = Vec::with_capacity(5);
    let mut seen = HashSet::new();
    seen.insert(n % SITE_PAGES);
    while links.len() < 5 {
        let m = rng.next_u64() % SITE_PAGES;
        if seen.insert(m) {
            links.push(m);
        }
    }
    let h1 = title(&mut rng);
    let description = sentence(&mut rng);

    let mut s = String::with_capacity(target + 2048);
    let _ = write!(
        s,
        r##"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{h1} - Site {n}</title>
<meta name="description" content="{description}">
<link rel="canonical" href="/site/{n}">
<style>body{{font-family:Georgia,serif;max-width:48rem;margin:auto}}.nav a{{margin-right:1rem}}.footer{{color:#666}}</style>
</head>
<body>
<header class="header"><div class="brand">Pipeline Bench Site</div>
<nav class="nav"><a href="#top">Top</a><a href="#main">Main</a><a href="#see-also">See also</a><a href="#footer">About</a></nav>
</header>
<div class="cookie-notice">This site stores a small preference cookie. <a href="#footer">Details</a></div>
<main id="main">
<article>
<h1>{h1}</h1>
<p class="meta">Page {n} of the benchmark site.</p>
"##
    );
    let mut see_also = String::from("<section id=\"see-also\"><h2>See also</h2>\n<ul>\n");
    for m in &links {
        let _ = writeln!(see_also, "<li><a href=\"/site/{m}\">Site page {m}</a></li>");
    }
    see_also.push_str("</ul>\n</section>\n");
    let footer = "</article>\n</main>\n<footer class=\"footer\" id=\"footer\"><p>Pipeline Bench Site is generated \
                  for crawler benchmarks. Nothing here is real.</p><p>Copyright notice: none.</p></footer>\n</body>\n</html>\n";
    let mut paragraphs = 0;
    while s.len() + see_also.len() + footer.len() < target {
        if paragraphs % 4 == 0 {
            let _ = writeln!(s, "<h2>{}</h2>", title(&mut rng));
        }
        let _ = writeln!(s, "<p>{}</p>", paragraph(&mut rng));
        paragraphs += 1;
    }
    s.push_str(&see_also);
    s.push_str(footer);
    s
}
