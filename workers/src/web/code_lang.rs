//! Code blocks' languages for markdown fences: read from the class names syntax highlighters
//! and markdown renderers leave on a `<pre>`, its `<code>` or the wrappers around it
//! (`language-rust`, `lang-py`, GitHub's `highlight-source-js`, Sphinx's `highlight-python`,
//! Rouge's `language-ruby highlighter-rouge` wrapper, pandoc's `sourceCode python`,
//! SyntaxHighlighter's `brush: js`), and written as `data-lang` on the `<pre>`, where the
//! markdown serializer looks for it: Readability strips class names, so without this every
//! fence of an article would be a bare one.
//!
//! Not here: finding the `<pre>` elements (`web::prune` collects them in its walk) or guessing
//! a language from the code itself (a wrong label is worse than none).

use dom_query::NodeRef;

/// Class prefixes that carry the language after them.
const PREFIXES: &[&str] = &["language-", "lang-", "highlight-source-", "highlight-"];

/// Wrapper levels above the `<pre>` searched for a language class (Rouge puts it two up).
const ANCESTORS: usize = 3;

/// Longest language label accepted.
const MAX_LEN: usize = 24;

/// Labels that name no language.
const NOT_LANGUAGES: &[&str] = &[
    "none",
    "nohighlight",
    "default",
    "auto",
    "plain",
    "undefined",
];

/// Labels each `<pre>` of `pres` that names no language itself (`data-lang`,
/// `data-language`) with the one its classes or its wrappers' classes give, if any.
pub fn label(pres: &[NodeRef<'_>]) {
    for pre in pres {
        if pre.has_attr("data-lang") || pre.has_attr("data-language") {
            continue;
        }
        let code = pre
            .first_element_child()
            .filter(|child| child.has_name("code"));
        let own = std::iter::once(*pre).chain(code).map(|node| (node, true));
        // Wrappers, not the page: `<body class="lang-en">` names the page's language.
        let wrappers = pre
            .ancestors_it(Some(ANCESTORS))
            .take_while(|node| !node.has_name("body") && !node.has_name("html"))
            .map(|node| (node, false));
        let found = own.chain(wrappers).find_map(|(node, own)| {
            node.attr("class")
                .and_then(|class| from_classes(&class, own))
        });
        if let Some(language) = found {
            pre.set_attr("data-lang", &language);
        }
    }
}

/// The language a class attribute names, lowercased, if it names one. `lang-` counts only on
/// the block itself (`own`): on a wrapper it is as often a human language (`lang-en`).
fn from_classes(classes: &str, own: bool) -> Option<String> {
    let mut words = classes.split_ascii_whitespace();
    let mut source_code = false;
    let mut other = None;
    while let Some(word) = words.next() {
        if let Some(found) = PREFIXES
            .iter()
            .filter(|prefix| own || **prefix != "lang-")
            .find_map(|prefix| word.strip_prefix(prefix))
            .and_then(valid)
        {
            return Some(found);
        }
        match word {
            // SyntaxHighlighter: `brush: js;` (or `brush:js`).
            "brush:" => {
                return words
                    .next()
                    .and_then(|next| valid(next.trim_end_matches(';')));
            }
            _ if word.starts_with("brush:") => {
                return valid(word.trim_start_matches("brush:").trim_end_matches(';'));
            }
            // pandoc: `sourceCode python` (with `numberSource` and the like beside it).
            "sourceCode" => source_code = true,
            _ if other.is_none() && !word.ends_with("Source") => other = Some(word),
            _ => {}
        }
    }
    if source_code {
        other.and_then(valid)
    } else {
        None
    }
}

/// `label` lowercased when it looks like a language name (letters, digits, `+#._-`).
fn valid(label: &str) -> Option<String> {
    let ok = !label.is_empty()
        && label.len() <= MAX_LEN
        && label.starts_with(|c: char| c.is_ascii_alphanumeric())
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '#' | '.' | '_' | '-'));
    let label = label.to_ascii_lowercase();
    (ok && !NOT_LANGUAGES.contains(&label.as_str())).then_some(label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dom_query::Document;

    fn labelled(html: &str) -> Vec<Option<String>> {
        let doc = Document::from(html);
        let pres: Vec<NodeRef<'_>> = doc.select("pre").nodes().to_vec();
        label(&pres);
        pres.iter()
            .map(|pre| pre.attr("data-lang").map(|v| v.to_string()))
            .collect()
    }

    #[test]
    fn reads_the_common_highlighter_conventions() {
        let html = r#"<body>
            <pre><code class="language-rust">fn main() {}</code></pre>
            <pre class="lang-py">print(1)</pre>
            <div class="highlight highlight-source-js"><pre>let a;</pre></div>
            <div class="highlight-python notranslate"><div class="highlight"><pre>x = 1</pre></div></div>
            <div class="language-ruby highlighter-rouge"><div class="highlight"><pre class="highlight"><code>puts 1</code></pre></div></div>
            <pre class="sourceCode numberSource python">y = 2</pre>
            <pre class="brush: js;">var b;</pre>
            <pre data-lang="go">package main</pre>
            <pre><code class="language-C++">int x;</code></pre>
        </body>"#;
        let found = labelled(html);
        let want = [
            "rust", "py", "js", "python", "ruby", "python", "js", "go", "c++",
        ];
        assert_eq!(
            found,
            want.iter()
                .map(|w| Some((*w).to_owned()))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn leaves_blocks_without_a_language_bare() {
        let html = r#"<body>
            <pre>plain</pre>
            <pre class="highlight"><code class="hljs">no label</code></pre>
            <pre><code class="language-none">x</code></pre>
            <div class="highlight-default"><pre>y</pre></div>
            <pre class="language-<script>">z</pre>
            <div class="lang-en"><pre>w</pre></div>
        </body>"#;
        assert_eq!(labelled(html), vec![None; 6]);
    }
}
