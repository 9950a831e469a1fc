//! A discussion thread's posts, read from the schema.org microdata the common forum engines
//! write (XenForo, NodeBB, Q&A sites): every `Comment`, `DiscussionForumPosting`, `Answer`
//! and `Question` item that holds its text in an `itemprop="text"` (or `articleBody`)
//! element, with its author and date, quotes of earlier posts left out; and a thread's answer
//! rebuilt from them: what the extractor found before the first post (a title, an opening
//! post without microdata), then the posts in page order.
//!
//! Not here: threads without microdata (the extractor's answer stands), Discourse's copy for
//! clients without scripts (`noscript`), or comments under an article (only pages typed
//! `forum` are read for posts).

use dom_query::{Document, NodeRef};
use url::Url;

use super::blocks::{Said, block_as};
use super::prune;
use crate::job::Format;

/// The schema.org types of an item that is one post of a thread.
const POST_TYPES: &[&str] = &["Comment", "DiscussionForumPosting", "Answer", "Question"];

/// A `Comment` inside an item of these types is a remark under a question or an answer,
/// not a post of the thread (Q&A sites).
const QA_TYPES: &[&str] = &["Answer", "Question"];

/// The properties that hold a post's text.
const TEXT_PROPS: &[&str] = &["text", "articleBody"];

/// Fewest posts that make a thread worth rebuilding: one is the extractor's to find.
const MIN_POSTS: usize = 2;

/// A quote (`<blockquote>` in a post) is left out when more than this share of its runs of
/// four words was said by an earlier post: the reply quotes what the thread already holds.
const QUOTE_HELD_SHARE: f64 = 0.5;

/// An author's name or a date longer than this (characters) is some other block that happens
/// to carry the property (a profile card, a signature): left out.
const LABEL_MAX_CHARS: usize = 80;

/// A line of the extractor's answer from which half or more of the runs are in the posts is
/// where the posts begin: what comes before it is kept.
const OPENING_HELD_SHARE: f64 = 0.5;

/// The schema.org type of `node` among [`POST_TYPES`] (an `itemtype` may list several).
fn post_type(node: &NodeRef<'_>) -> Option<&'static str> {
    let itemtype = node.attr("itemtype")?;
    itemtype.split_whitespace().find_map(|url| {
        let url = url.trim_end_matches('/');
        let (host, name) = url.rsplit_once('/')?;
        if !host.ends_with("schema.org") {
            return None;
        }
        POST_TYPES.iter().copied().find(|&post| post == name)
    })
}

/// Whether `node`'s `itemprop` names one of `names`.
fn has_prop(node: &NodeRef<'_>, names: &[&str]) -> bool {
    node.attr("itemprop")
        .is_some_and(|props| props.split_whitespace().any(|prop| names.contains(&prop)))
}

/// The item `node` belongs to: its nearest ancestor that starts an item.
fn owner<'a>(node: &NodeRef<'a>) -> Option<NodeRef<'a>> {
    node.ancestors_it(None)
        .find(|ancestor| ancestor.has_attr("itemscope") || ancestor.has_attr("itemtype"))
}

/// `node`'s descendant elements that belong to `item`'s own properties (not to an item
/// nested in it).
fn own_props<'a>(item: &NodeRef<'a>, names: &'a [&'a str]) -> impl Iterator<Item = NodeRef<'a>> {
    let id = item.id;
    item.descendants_it().filter(move |node| {
        node.is_element()
            && has_prop(node, names)
            && owner(node).is_some_and(|owner| owner.id == id)
    })
}

/// Text with its runs of whitespace made one space, `None` when empty or longer than
/// [`LABEL_MAX_CHARS`].
fn label(text: &str) -> Option<String> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!text.is_empty() && text.chars().count() <= LABEL_MAX_CHARS).then_some(text)
}

/// The name of a post's author: the `name` of its `author` item, else the `author`
/// property's own content or text.
fn author(item: &NodeRef<'_>) -> Option<String> {
    let author = own_props(item, &["author"]).next()?;
    let named = if author.has_attr("itemscope") || author.has_attr("itemtype") {
        own_props(&author, &["name"]).next()
    } else {
        None
    };
    let source = named.unwrap_or(author);
    match source.attr("content") {
        Some(content) => label(&content),
        None => label(&source.text()),
    }
}

/// When a post was written, as the page shows it: the text of its first `<time>` outside its
/// text.
fn date(item: &NodeRef<'_>, text: &NodeRef<'_>) -> Option<String> {
    item.descendants_it()
        .filter(|node| node.has_name("time"))
        .find(|time| {
            !time
                .ancestors_it(None)
                .any(|ancestor| ancestor.id == text.id)
        })
        .and_then(|time| label(&time.text()))
}

/// The posts of the thread on `document`, each as `format` (author and date, then its text),
/// in page order; none when fewer than [`MIN_POSTS`] carry their text. Links are made
/// absolute against `base`. A post's quotes of earlier posts are removed from the document.
pub(super) fn posts(document: &Document, format: Format, base: &Url) -> Vec<String> {
    let Some(body) = document.select("body").nodes().first().copied() else {
        return Vec::new();
    };
    let items: Vec<NodeRef<'_>> = body
        .descendants_it()
        .filter(|node| node.is_element() && post_type(node).is_some())
        .collect();
    let mut said = Said::of("");
    let mut posts = Vec::new();
    for item in items {
        let remark = post_type(&item) == Some("Comment")
            && owner(&item)
                .and_then(|owner| post_type(&owner))
                .is_some_and(|kind| QA_TYPES.contains(&kind));
        if remark {
            continue;
        }
        // The element that holds the text; a container of other posts is not one post.
        let Some(text) = own_props(&item, TEXT_PROPS).find(|node| !node.has_name("meta")) else {
            continue;
        };
        if text
            .descendants_it()
            .any(|node| node.is_element() && post_type(&node).is_some())
        {
            continue;
        }
        let author = author(&item);
        let date = date(&item, &text);
        let quotes: Vec<NodeRef<'_>> = text
            .descendants_it()
            .filter(|node| node.has_name("blockquote"))
            .collect();
        for quote in quotes {
            let runs = Said::runs(&quote.text());
            if !runs.is_empty() && said.held(&runs) as f64 > QUOTE_HELD_SHARE * runs.len() as f64 {
                quote.remove_from_parent();
            }
        }
        let Some(plain) = block_as(text, Format::Text, base) else {
            continue;
        };
        if plain.trim().is_empty() {
            continue;
        }
        said.add(Said::runs(&plain));
        let written = match format {
            Format::Text => plain,
            Format::Markdown | Format::Html => match block_as(text, format, base) {
                Some(written) => written,
                None => continue,
            },
        };
        let heading = match (format, author, date) {
            (Format::Markdown, Some(author), Some(date)) => format!("**{author}** · {date}"),
            (Format::Markdown, Some(author), None) => format!("**{author}**"),
            (_, author, date) => [author, date]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("\n"),
        };
        let written = written.trim();
        posts.push(if heading.is_empty() {
            written.to_owned()
        } else {
            format!("{heading}\n\n{written}")
        });
    }
    if posts.len() < MIN_POSTS {
        return Vec::new();
    }
    posts
}

/// `answer` (as `format`) rebuilt around the thread's `posts`: its lines before the first
/// that the posts mostly say ([`OPENING_HELD_SHARE`]: the thread's title, an opening post
/// written without microdata), then every post.
pub(super) fn with_posts(answer: &str, posts: &[String], format: Format) -> String {
    let plain = |text: &str| match format {
        Format::Markdown => prune::markdown_plain(text),
        Format::Text | Format::Html => text.to_owned(),
    };
    let said = Said::of(&plain(&posts.join("\n\n")));
    let opening: Vec<&str> = answer
        .lines()
        .take_while(|line| {
            let runs = Said::runs(&plain(line));
            runs.is_empty() || (said.held(&runs) as f64) < OPENING_HELD_SHARE * runs.len() as f64
        })
        .collect();
    let opening = opening.join("\n");
    let opening = opening.trim();
    let posts = posts.join("\n\n");
    if opening.is_empty() {
        posts
    } else {
        format!("{opening}\n\n{posts}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A post as a forum engine writes it: a `Comment` item with its author, date and text.
    fn post(author: &str, date: &str, text: &str) -> String {
        format!(
            r#"<article itemscope itemtype="https://schema.org/Comment" class="message">
            <div itemprop="author" itemscope itemtype="https://schema.org/Person">
            <a href="/members/{author}"><span itemprop="name">{author}</span></a>
            <span class="title">Well-known member</span></div>
            <a href="/posts/1"><time itemprop="datePublished" datetime="2024-10-08">{date}</time></a>
            <div itemprop="text">{text}</div></article>"#
        )
    }

    fn base() -> Url {
        Url::parse("https://forum.example/threads/kilns.1/").expect("url")
    }

    #[test]
    fn every_post_with_its_author_and_date_quotes_of_earlier_posts_left_out() {
        let first = "Which kiln do you use for stoneware, and how long does a glaze firing take?";
        let html = format!(
            r#"<html><body><h1>Kilns</h1><p>{first}</p>{}{}{}
            <aside><div itemscope itemtype="https://schema.org/Comment">
            <div itemprop="author">ads</div></div></aside></body></html>"#,
            post(
                "ana",
                "Oct 8, 2024",
                "An electric kiln: <a href=\"/wiki/cone\">cone 6</a> takes about eight hours."
            ),
            post(
                "ben",
                "Oct 9, 2024",
                "<blockquote>ana said: An electric kiln: cone 6 takes about eight hours.</blockquote>\
                 Mine takes ten, with a slow cool at the end."
            ),
            post(
                "cy",
                "Oct 9, 2024",
                "<p>Gas here.</p><p>Reduction firing, twelve hours.</p>"
            ),
        );
        let posts = posts_of(&html);
        assert_eq!(posts.len(), 3, "{posts:?}");
        assert_eq!(
            posts[0],
            "ana\nOct 8, 2024\n\nAn electric kiln: cone 6 takes about eight hours."
        );
        // The quote of ana's post is hers, not ben's: said once.
        assert_eq!(
            posts[1],
            "ben\nOct 9, 2024\n\nMine takes ten, with a slow cool at the end."
        );
        assert!(posts[2].contains("Gas here.\n"), "{}", posts[2]);
        // The answer keeps what comes before the posts (the opening post, here without
        // microdata), then the posts.
        let answer = format!(
            "Kilns\n\n{first}\n\nAn electric kiln: cone 6 takes about eight hours.\n\nGas here."
        );
        let rebuilt = with_posts(&answer, &posts, Format::Text);
        assert!(
            rebuilt.starts_with(&format!("Kilns\n\n{first}\n\nana\n")),
            "{rebuilt}"
        );
        assert_eq!(rebuilt.matches("eight hours").count(), 1, "{rebuilt}");

        let markdown = super::posts(&Document::from(html.as_str()), Format::Markdown, &base());
        assert!(
            markdown[0].starts_with("**ana** · Oct 8, 2024\n\nAn electric kiln: [cone 6](https://forum.example/wiki/cone)"),
            "{}",
            markdown[0]
        );
    }

    #[test]
    fn a_questions_remarks_are_not_posts_and_one_post_is_no_thread() {
        let remark = r#"<div itemscope itemtype="https://schema.org/Comment">
            <span itemprop="text">Which version?</span></div>"#;
        let html = format!(
            r#"<html><body>
            <div itemscope itemtype="https://schema.org/Question">
            <div itemprop="text">How do I centre a div?</div>{remark}</div>
            <div itemscope itemtype="https://schema.org/Answer">
            <div itemprop="text">Use a grid and place-items.</div>{remark}</div>
            </body></html>"#
        );
        assert_eq!(
            posts_of(&html),
            vec!["How do I centre a div?", "Use a grid and place-items."]
        );
        let one = r#"<html><body><div itemscope itemtype="http://schema.org/Comment">
            <div itemprop="text">Alone.</div></div>
            <div itemscope itemtype="https://schema.org/Review"><div itemprop="text">Not a post.</div>
            </div></body></html>"#;
        assert!(posts_of(one).is_empty());
    }

    fn posts_of(html: &str) -> Vec<String> {
        posts(&Document::from(html), Format::Text, &base())
    }
}
