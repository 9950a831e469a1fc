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

use std::collections::HashMap;

use dom_query::{Document, NodeId, NodeRef};
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

/// Whether `node` starts an item of its own.
fn starts_item(node: &NodeRef<'_>) -> bool {
    node.has_attr("itemscope") || node.has_attr("itemtype")
}

/// Text with its runs of whitespace made one space, `None` when empty or longer than
/// [`LABEL_MAX_CHARS`].
fn label(text: &str) -> Option<String> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!text.is_empty() && text.chars().count() <= LABEL_MAX_CHARS).then_some(text)
}

/// What an element's descendants are inside of: the nearest item, the nearest post, and the
/// post whose text holds them.
#[derive(Clone, Copy, Default)]
struct Inside {
    item: Option<NodeId>,
    post: Option<NodeId>,
    text_of: Option<NodeId>,
}

/// One post as the walk finds it.
struct Found<'a> {
    item: NodeRef<'a>,
    /// A remark under a Q&A post, or a container of other posts: not written.
    skipped: bool,
    text: Option<NodeRef<'a>>,
    author: Option<NodeRef<'a>>,
    time: Option<NodeRef<'a>>,
}

/// The name of a post's `author` element: the first `name` of its own item when it starts
/// one, else its own content or text.
fn author_name(author: NodeRef<'_>, names: &HashMap<NodeId, NodeRef<'_>>) -> Option<String> {
    let source = names.get(&author.id).copied().unwrap_or(author);
    match source.attr("content") {
        Some(content) => label(&content),
        None => label(&source.text()),
    }
}

/// The posts of the thread on `document`, each as `format` (author and date, then its text),
/// in page order; none when fewer than [`MIN_POSTS`] carry their text. Links are made
/// absolute against `base`. A post's quotes of earlier posts are removed from the document.
/// One walk of the page finds every post's parts (each element is placed by its parent's
/// place), so that a deeply nested thread costs no more than its size.
pub(super) fn posts(document: &Document, format: Format, base: &Url) -> Vec<String> {
    let Some(body) = document.select("body").nodes().first().copied() else {
        return Vec::new();
    };
    let mut inside: HashMap<NodeId, Inside> = HashMap::new();
    let mut found: Vec<Found<'_>> = Vec::new();
    let mut post_at: HashMap<NodeId, usize> = HashMap::new();
    // The first `name` property of each item, for its author's name.
    let mut names: HashMap<NodeId, NodeRef<'_>> = HashMap::new();
    for node in body.descendants_it() {
        if !node.is_element() {
            continue;
        }
        let above = node
            .parent()
            .and_then(|parent| inside.get(&parent.id).copied())
            .unwrap_or_default();
        // The post whose own property this element is (its nearest item is the post).
        let own = above.post.filter(|&post| above.item == Some(post));
        let kind = post_type(&node);
        if let Some(kind) = kind {
            let remark = kind == "Comment"
                && above.item.is_some_and(|item| {
                    post_at.get(&item).is_some_and(|&at| {
                        post_type(&found[at].item).is_some_and(|owner| QA_TYPES.contains(&owner))
                    })
                });
            // A post inside another's text: that one is a container of posts.
            if let Some(&at) = above.text_of.and_then(|post| post_at.get(&post)) {
                found[at].skipped = true;
            }
            post_at.insert(node.id, found.len());
            found.push(Found {
                item: node,
                skipped: remark,
                text: None,
                author: None,
                time: None,
            });
        }
        let mut text_of = above.text_of;
        if let Some(&at) = own.and_then(|post| post_at.get(&post)) {
            let post = &mut found[at];
            if post.text.is_none() && !node.has_name("meta") && has_prop(&node, TEXT_PROPS) {
                post.text = Some(node);
                text_of = Some(post.item.id);
            } else if post.author.is_none() && has_prop(&node, &["author"]) {
                post.author = Some(node);
            }
        }
        if has_prop(&node, &["name"])
            && let Some(item) = above.item
        {
            names.entry(item).or_insert(node);
        }
        if node.has_name("time")
            && let Some(&at) = above.post.and_then(|post| post_at.get(&post))
            && above.text_of != above.post
        {
            found[at].time.get_or_insert(node);
        }
        inside.insert(
            node.id,
            Inside {
                item: if starts_item(&node) {
                    Some(node.id)
                } else {
                    above.item
                },
                post: if kind.is_some() {
                    Some(node.id)
                } else {
                    above.post
                },
                text_of,
            },
        );
    }
    let mut said = Said::default();
    let mut posts = Vec::new();
    for post in found.iter().filter(|post| !post.skipped) {
        let Some(text) = post.text else {
            continue;
        };
        let author = post.author.and_then(|author| author_name(author, &names));
        let date = post.time.and_then(|time| label(&time.text()));
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

    #[test]
    fn nested_replies_are_each_their_own_post_in_page_order() {
        // Replies inside their parent's item (outside its text), as threaded comment pages
        // nest them; deep enough that a walk per post would show.
        let depth = 400;
        let mut html = String::from("<html><body>");
        for at in 0..depth {
            html.push_str(&format!(
                r#"<div itemscope itemtype="https://schema.org/Comment">
                <span itemprop="author">user{at}</span><div itemprop="text">reply number {at}</div>"#
            ));
        }
        html.push_str(&"</div>".repeat(depth));
        html.push_str("</body></html>");
        let posts = posts_of(&html);
        assert_eq!(posts.len(), depth);
        assert_eq!(posts[0], "user0\n\nreply number 0");
        assert_eq!(
            posts[depth - 1],
            format!("user{}\n\nreply number {}", depth - 1, depth - 1)
        );
    }

    fn posts_of(html: &str) -> Vec<String> {
        posts(&Document::from(html), Format::Text, &base())
    }
}
